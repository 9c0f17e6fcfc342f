import Foundation
import HTTPCaching

/// Prints lines whole, from any thread (events arrive on the network's threads).
enum Output {
    private static let lock = NSLock()

    static func line(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardError.write(Data(("cache-demo: " + text + "\n").utf8))
    }
}

/// A JSON object written in the order its fields are given.
struct JSONLine {
    enum Value {
        case string(String), number(Double), int(Int), bool(Bool)
    }

    private var fields: [(String, Value)] = []

    init(_ fields: [(String, Value)]) { self.fields = fields }

    var text: String {
        "{" + fields.map { "\(Self.quote($0.0)):\(Self.render($0.1))" }.joined(separator: ",") + "}"
    }

    static func render(_ value: Value) -> String {
        switch value {
        case .string(let string): quote(string)
        case .int(let int): String(int)
        case .bool(let bool): bool ? "true" : "false"
        case .number(let number): number.isFinite ? String(format: "%.1f", number) : "null"
        }
    }

    static func quote(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension CacheEvent {
    /// The event's name and details for the JSON lines, or nil for `served`, which the
    /// request lines already report.
    var jsonLine: JSONLine? {
        var fields: [(String, JSONLine.Value)]
        switch kind {
        case .served: return nil
        case .collapsed: fields = [("event", .string("collapsed"))]
        case .stored: fields = [("event", .string("stored"))]
        case .notStored(let reason): fields = [("event", .string("not_stored")), ("reason", .string(reason.description))]
        case .refreshed(let changed): fields = [("event", .string("refreshed")), ("changed", .bool(changed))]
        case .refreshFailed(let reason): fields = [("event", .string("refresh_failed")), ("reason", .string(reason))]
        case .evicted: fields = [("event", .string("evicted"))]
        case .invalidated: fields = [("event", .string("invalidated"))]
        case .corrupted(let reason): fields = [("event", .string("corrupted")), ("reason", .string(reason))]
        case .storeFailed(let reason): fields = [("event", .string("store_failed")), ("reason", .string(reason))]
        }
        fields.append(("key", .string(key.description)))
        if let url { fields.append(("url", .string(url.absoluteString))) }
        return JSONLine(fields)
    }

    /// A short human description for the table output.
    var summary: String {
        switch kind {
        case .refreshed(let changed): "refreshed in the background (body \(changed ? "changed" : "unchanged"))"
        case .refreshFailed(let reason): "background refresh failed: \(reason)"
        case .notStored(let reason): "not stored: \(reason)"
        default: "\(kind)"
        }
    }
}
