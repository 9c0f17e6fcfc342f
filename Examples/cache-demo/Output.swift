import Foundation
import HTTPCaching

/// Prints lines whole, from any thread (events arrive on the network's threads).
enum Output {
    private static let lock = NSLock()

    static func line(_ text: String, newline: Bool = true) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(Data((newline ? text + "\n" : text).utf8))
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
        /// A number with up to four decimals (a ratio), where `number` keeps one.
        case ratio(Double)
        /// A JSON object, nested.
        case object(JSONLine)
        case null
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
        case .ratio(let ratio): ratio.isFinite ? String(Double(String(format: "%.4f", ratio)) ?? 0) : "null"
        case .object(let object): object.text
        case .null: "null"
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
        let names = ["notStored": "not_stored", "refreshFailed": "refresh_failed", "storeFailed": "store_failed"]
        guard kind.status == nil else { return nil }
        var fields: [(String, JSONLine.Value)] = [("event", .string(names[kind.name] ?? kind.name))]
        if let reason = kind.notStoredReason?.description ?? kind.reason { fields.append(("reason", .string(reason))) }
        if let changed = kind.bodyChanged { fields.append(("changed", .bool(changed))) }
        fields.append(("key", .string(key.description)))
        if let url { fields.append(("url", .string(url.absoluteString))) }
        return JSONLine(fields)
    }

    /// A short human description for the table output.
    var summary: String {
        if let changed = kind.bodyChanged { return "refreshed in the background (body \(changed ? "changed" : "unchanged"))" }
        if kind.name == "refreshFailed", let reason = kind.reason { return "background refresh failed: \(reason)" }
        if let reason = kind.notStoredReason { return "not stored: \(reason)" }
        return "\(kind)"
    }
}
