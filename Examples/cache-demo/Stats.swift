import Foundation
import HTTPCaching

/// The cache's statistics as the demo prints them: a table, a JSON line, and the
/// walkthrough's sentences of what happened, every number read from `CacheStatistics`.
enum StatsReport {
    /// The statuses answered from the store, as `CacheStatistics.hitRatio` counts them.
    static let storeStatuses: [CacheStatus] = [.fresh, .stale, .revalidated, .fallback]
    /// The statuses answered by the network.
    static let originStatuses: [CacheStatus] = [.miss, .expired, .bypass]

    /// Every status the demo reports, store first; later library versions may add more.
    static var statuses: [CacheStatus] {
        storeStatuses + originStatuses + CacheStatus.all.filter { !(storeStatuses + originStatuses).contains($0) }
    }

    /// The statistics as a table for people: one counter a line, requests by status indented.
    static func table(_ statistics: CacheStatistics) -> [String] {
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss"
        var lines = ["statistics (since \(time.string(from: statistics.since)))"]
        func row(_ name: String, _ value: Int, _ note: String = "") {
            let padded = name.padding(toLength: 28, withPad: " ", startingAt: 0)
            let number = String(value)
            lines.append(padded + String(repeating: " ", count: max(0, 8 - number.count)) + number + (note.isEmpty ? "" : "  " + note))
        }
        row("requests", statistics.requestCount, "hit ratio \(percent(statistics.hitRatio)) (fresh, stale, revalidated, fallback)")
        for status in statuses { row("  " + status.rawValue, statistics.requests[status] ?? 0) }
        row("collapsed", statistics.collapsed)
        row("origin requests", statistics.originRequests, "callers', revalidations and background refreshes")
        row("bytes served from the store", statistics.bytesServedFromStore)
        row("bytes fetched from origin", statistics.bytesFetchedFromOrigin)
        row("stored", statistics.stored)
        row("not stored", statistics.notStored.values.reduce(0, +))
        for (reason, count) in statistics.notStored.sorted(by: { $0.key < $1.key }) { row("  " + reason, count) }
        row("refreshes started", statistics.refreshesStarted)
        row("refreshes succeeded", statistics.refreshesSucceeded)
        row("refreshes failed", statistics.refreshesFailed)
        row("evictions", statistics.evictions)
        row("invalidations", statistics.invalidations)
        row("corruptions", statistics.corruptions)
        row("store failures", statistics.storeFailures)
        row("store entries", statistics.entries)
        row("store bytes", statistics.bytes)
        return lines
    }

    /// The statistics as one JSON line, `{"stats":{...}}`: `requests` by status (every status,
    /// zeros included), `request_count`, `hit_ratio` (0 to 1), the counters in snake case,
    /// `not_stored` by reason, `refreshes` (`started`, `succeeded`, `failed`), the store's
    /// `entries` and `bytes`, and `since` (ISO 8601).
    static func jsonLine(_ statistics: CacheStatistics) -> JSONLine {
        let requests = JSONLine(statuses.map { ($0.rawValue, .int(statistics.requests[$0] ?? 0)) })
        let notStored = JSONLine(statistics.notStored.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })
        let refreshes = JSONLine([("started", .int(statistics.refreshesStarted)), ("succeeded", .int(statistics.refreshesSucceeded)),
                                  ("failed", .int(statistics.refreshesFailed))])
        let fields: [(String, JSONLine.Value)] = [
            ("requests", .object(requests)), ("request_count", .int(statistics.requestCount)),
            ("hit_ratio", .ratio(statistics.hitRatio)), ("collapsed", .int(statistics.collapsed)),
            ("origin_requests", .int(statistics.originRequests)),
            ("bytes_served_from_store", .int(statistics.bytesServedFromStore)),
            ("bytes_fetched_from_origin", .int(statistics.bytesFetchedFromOrigin)),
            ("stored", .int(statistics.stored)), ("not_stored", .object(notStored)), ("refreshes", .object(refreshes)),
            ("evictions", .int(statistics.evictions)), ("invalidations", .int(statistics.invalidations)),
            ("corruptions", .int(statistics.corruptions)), ("store_failures", .int(statistics.storeFailures)),
            ("entries", .int(statistics.entries)), ("bytes", .int(statistics.bytes)),
            ("since", .string(ISO8601DateFormatter().string(from: statistics.since))),
        ]
        return JSONLine([("stats", .object(JSONLine(fields)))])
    }

    /// Prints the statistics in the chosen format (`--json` makes `table` a JSON line).
    static func write(_ statistics: CacheStatistics, as format: StatsFormat, json: Bool) {
        switch format {
        case .prometheus where json: Output.line(statistics.prometheusText(), newline: false)
        case .prometheus: Output.line("\n" + statistics.prometheusText(), newline: false)
        case .table where json: Output.line(jsonLine(statistics).text)
        case .table: Output.line("\n" + table(statistics).joined(separator: "\n"))
        }
    }

    /// What a run did, in sentences computed from its statistics and from how many requests
    /// the origin says it received: requests by how they were answered, what the cache asked
    /// of the origin, and what it stored.
    static func summary(_ statistics: CacheStatistics, originReceived: Int) -> [String] {
        let total = statistics.requestCount
        let fromStore = storeStatuses.reduce(0) { $0 + (statistics.requests[$1] ?? 0) }
        let revalidated = statistics.requests[.revalidated] ?? 0
        var asked = [counted(statistics.refreshesStarted, "background refresh", "background refreshes")]
        if revalidated > 0 { asked.append("\(counted(revalidated, "revalidation")) answered 304") }
        return [
            "in this run: \(counted(total, "request")), \(fromStore) answered from the store\(breakdown(statistics, storeStatuses))"
                + " and \(total - fromStore) by the origin\(breakdown(statistics, statuses.filter { !storeStatuses.contains($0) }))"
                + "; hit ratio \(percent(statistics.hitRatio))",
            "the cache asked the origin \(counted(statistics.originRequests, "time")) (\(asked.joined(separator: ", "))); "
                + "the origin received \(counted(originReceived, "request"))"
                + (originReceived < statistics.originRequests ? " (\(statistics.originRequests - originReceived) did not reach it)" : ""),
            "\(counted(statistics.stored, "response")) stored; the store holds \(counted(statistics.entries, "entry", "entries"))"
                + " (\(statistics.bytes) bytes)",
        ]
    }

    /// ` (3 fresh, 1 stale)`: the nonzero counts of `statuses`, or nothing.
    private static func breakdown(_ statistics: CacheStatistics, _ statuses: [CacheStatus]) -> String {
        let parts = statuses.compactMap { status in (statistics.requests[status] ?? 0) > 0 ? "\(statistics.requests[status]!) \(status.rawValue)" : nil }
        return parts.isEmpty ? "" : " (\(parts.joined(separator: ", ")))"
    }

    /// `1 request`, `2 requests`.
    static func counted(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
    }

    private static func percent(_ ratio: Double) -> String {
        "\(Int((ratio * 100).rounded()))%"
    }
}
