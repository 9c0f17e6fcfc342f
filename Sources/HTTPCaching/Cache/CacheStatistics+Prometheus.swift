import Foundation

extension CacheStatistics {
    /// The statistics in the Prometheus text exposition format (version 0.0.4), for a
    /// `/metrics` route: counters as `<prefix>_..._total`, the store's entries and bytes as
    /// gauges, each with `# HELP` and `# TYPE` lines, label values escaped.
    /// - Parameter prefix: the metric names' prefix. The default is `httpcaching`.
    public func prometheusText(prefix: String = "httpcaching") -> String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: Int)]) {
            let metric = prefix + "_" + name
            text += "# HELP \(metric) \(Self.escapeHelp(help))\n# TYPE \(metric) \(type)\n"
            for sample in samples {
                let labels = sample.labels.map { "\($0.0)=\"\(Self.escapeLabel($0.1))\"" }.joined(separator: ",")
                text += metric + (labels.isEmpty ? "" : "{\(labels)}") + " \(sample.value)\n"
            }
        }
        let statuses = CacheStatus.all.map { (labels: [("status", $0.rawValue)], value: requests[$0] ?? 0) }
        family("requests_total", "counter", "Requests answered, by how the cache answered them.", statuses)
        family("collapsed_requests_total", "counter", "Requests that waited for another request's answer.", [([], collapsed)])
        family("no_vary_search_hits_total", "counter", "Requests answered by an entry stored for another URL, through its No-Vary-Search.",
               [([], servedThroughNoVarySearch)])
        family("origin_requests_total", "counter", "Requests sent to the origin, refreshes included.", [([], originRequests)])
        family("served_bytes_total", "counter", "Body bytes served, by where they came from.",
               [([("source", "store")], bytesServedFromStore), ([("source", "origin")], bytesFetchedFromOrigin)])
        family("stored_total", "counter", "Responses stored.", [([], stored)])
        family("not_stored_total", "counter", "Responses not stored, by reason.",
               notStored.sorted { $0.key < $1.key }.map { ([("reason", $0.key)], $0.value) })
        family("evictions_total", "counter", "Entries evicted to stay within the store's limits.", [([], evictions)])
        family("invalidations_total", "counter", "URLs invalidated by an unsafe method's answer, whether or not anything was stored under them.", [([], invalidations)])
        family("corruptions_total", "counter", "Damaged entries found and removed.", [([], corruptions)])
        family("store_failures_total", "counter", "Store reads and writes that failed.", [([], storeFailures)])
        family("refreshes_total", "counter", "Background refreshes, by outcome.",
               [([("outcome", "started")], refreshesStarted), ([("outcome", "succeeded")], refreshesSucceeded),
                ([("outcome", "failed")], refreshesFailed)])
        family("store_entries", "gauge", "Entries the store holds.", [([], entries)])
        family("store_bytes", "gauge", "Bytes the store's entries account for.", [([], bytes)])
        return text
    }

    /// A label value as the format writes it: backslash, double quote and line feed escaped.
    static func escapeLabel(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Help text as the format writes it: backslash and line feed escaped.
    static func escapeHelp(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
