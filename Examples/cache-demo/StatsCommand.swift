import Foundation
import HTTPCaching

/// `cache-demo stats [--store STORE] [--json]`: what a store holds (entries, bytes, the oldest
/// and the newest entry), read from the store alone: no cache, no network but the store's own.
enum StatsCommand {
    /// What the command reports about a store.
    struct Report: Equatable {
        /// The store, as `StoreChoice.label` names it.
        var store: String
        var entries: Int
        var bytes: Int
        /// Every entry's metadata; the oldest and newest are read from it.
        var infos: [StoredEntryInfo]
        /// Why there is nothing to list (a memory store, a directory not made yet); nil: listed.
        var emptyBecause: String?

        var oldest: StoredEntryInfo? { infos.min { ($0.storedAt, $0.url) < ($1.storedAt, $1.url) } }
        var newest: StoredEntryInfo? { infos.max { ($0.storedAt, $0.url) < ($1.storedAt, $1.url) } }
    }

    /// Runs the command. - Returns: the exit status: 0, or 1 if the store cannot be read.
    static func run(_ options: StatsOptions) -> Int32 {
        let report: Report
        do {
            report = try read(options.store)
        } catch {
            Output.error("cannot read the store (\(options.store.label)): \(error)")
            return 1
        }
        Output.line(options.json ? jsonLine(report).text : lines(report, now: Date()).joined(separator: "\n"))
        return 0
    }

    /// Reads a store's listing; a memory store is empty (it lives in one process), and a disk
    /// directory that does not exist is reported empty without being made.
    static func read(_ choice: StoreChoice) throws -> Report {
        switch choice {
        case .memory:
            return Report(store: choice.label, entries: 0, bytes: 0, infos: [],
                          emptyBecause: "a memory store lives only as long as the process that made it, so each cache-demo "
                              + "run starts with an empty one; --store disk or --store redis://... keeps entries between runs")
        case .disk:
            if let directory = choice.diskDirectory, !FileManager.default.fileExists(atPath: directory.path) {
                return Report(store: choice.label, entries: 0, bytes: 0, infos: [],
                              emptyBecause: "there is no store at \(directory.path) yet: nothing has been stored there")
            }
        case .redis:
            break
        }
        let store = try choice.makeStore()
        return Report(store: choice.label, entries: store.entryCount, bytes: store.totalBytes, infos: try store.entryInfos())
    }

    /// The report for people: one fact a line.
    static func lines(_ report: Report, now: Date) -> [String] {
        var lines = ["store    \(report.store)", "entries  \(report.entries)", "bytes    \(report.bytes)"]
        if let reason = report.emptyBecause { lines.append("empty: \(reason)") }
        if report.emptyBecause == nil && report.infos.isEmpty { lines.append("empty: the store holds no entries") }
        func describe(_ info: StoredEntryInfo) -> String {
            let age = max(0, now.timeIntervalSince(info.storedAt))
            return "\(info.url), stored \(ISO8601DateFormatter().string(from: info.storedAt)) (\(format(age)) s ago), "
                + "status \(info.statusCode), \(info.byteCount) bytes"
        }
        if let oldest = report.oldest { lines.append("oldest   " + describe(oldest)) }
        if let newest = report.newest { lines.append("newest   " + describe(newest)) }
        return lines
    }

    /// The report as one JSON object: `store`, `entries`, `bytes`, and `oldest` and `newest`
    /// (`url`, `stored_at` in ISO 8601, `status`, `bytes`), each null when the store is empty;
    /// `empty_because` when the store could not hold anything.
    static func jsonLine(_ report: Report) -> JSONLine {
        func entry(_ info: StoredEntryInfo?) -> JSONLine.Value {
            guard let info else { return .null }
            return .object(JSONLine([("url", .string(info.url)),
                                     ("stored_at", .string(ISO8601DateFormatter().string(from: info.storedAt))),
                                     ("status", .int(info.statusCode)), ("bytes", .int(info.byteCount))]))
        }
        var fields: [(String, JSONLine.Value)] = [("store", .string(report.store)), ("entries", .int(report.entries)),
                                                  ("bytes", .int(report.bytes)), ("oldest", entry(report.oldest)),
                                                  ("newest", entry(report.newest))]
        if let reason = report.emptyBecause { fields.append(("empty_because", .string(reason))) }
        return JSONLine(fields)
    }
}

extension StoreChoice: CustomStringConvertible {
    /// The store in words, credentials left out: `memory`, `disk PATH`, `redis HOST:PORT db N`,
    /// `redis-cluster HOST:PORT,HOST:PORT...` (`rediss` and `rediss-cluster` over TLS),
    /// `redis-sentinel NAME via HOST:PORT,... db N`.
    var label: String {
        switch self {
        case .memory:
            return "memory"
        case .disk:
            return "disk \(diskDirectory?.path ?? "")"
        case .redis(let url):
            guard let configuration = try? RedisConfiguration(url: url) else { return "redis" }
            let secure = configuration.tls == nil ? "" : "s"
            if configuration.isCluster {
                let first = RedisNodeAddress(host: configuration.host, port: configuration.port)
                let nodes = ([first] + configuration.clusterSeeds).map(\.description).joined(separator: ",")
                return "redis\(secure)-cluster \(nodes) (keys under cache-demo:)"
            }
            if let name = configuration.sentinelMasterName {
                let first = RedisNodeAddress(host: configuration.host, port: configuration.port)
                let sentinels = ([first] + configuration.additionalSentinels).map(\.description).joined(separator: ",")
                return "redis-sentinel \(name) via \(sentinels) db \(configuration.database) (keys under cache-demo:)"
            }
            return "redis\(secure) \(configuration.host):\(configuration.port) db \(configuration.database) (keys under cache-demo:)"
        }
    }

    /// The same as `label`.
    var description: String { label }

    /// A disk store's directory; nil for the other stores.
    var diskDirectory: URL? {
        guard case .disk(let path) = self else { return nil }
        return path.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? DiskResponseStore.defaultDirectory
    }
}
