import Foundation

// Interim parsers, to be replaced by the strict ones being written on another branch.
enum HTTPFieldParsing {
    static let maxDeltaSeconds: TimeInterval = 2_147_483_648

    static func deltaSeconds<S: StringProtocol>(_ text: S) -> TimeInterval? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        var value: UInt64 = 0
        for digit in text.utf8 {
            value = value * 10 + UInt64(digit - 48)
            if value >= 2_147_483_648 { return maxDeltaSeconds }
        }
        return TimeInterval(value)
    }

    static func age(_ value: String?) -> TimeInterval? {
        guard let value, let first = value.split(separator: ",", omittingEmptySubsequences: false).first else { return nil }
        return deltaSeconds(first.trimmingCharacters(in: .whitespaces))
    }

    static func ageHeaderValue(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite, seconds > 0 else { return "0" }
        if seconds >= maxDeltaSeconds { return "2147483648" }
        return String(Int(seconds))
    }

    static func varyNames(_ value: String?) -> [String] {
        (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }
}
