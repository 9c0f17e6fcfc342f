import Foundation

/// Strict, non-trapping readers of the HTTP fields the caching decision depends on: `Age`,
/// `Expires`, `Vary`, and delta-seconds in general (RFC 9111), plus a safe way to write `Age`.
///
/// Every function accepts any string (any Unicode, control characters, megabytes of digits)
/// and answers in bounded time without trapping. Numbers come back finite and within
/// `0...maxDeltaSeconds`. Dates are read by `HTTPDate.parse`; `Cache-Control` by `CacheControl`.
enum HTTPFieldParsing {
    /// The largest delta-seconds value a cache keeps: 2^31 seconds (over 68 years). Larger
    /// values, and calculations that overflow, count as this (RFC 9111 §1.2.2).
    static let maxDeltaSeconds: TimeInterval = 2_147_483_648

    /// The largest delta-seconds value as an integer.
    private static let maxDeltaInteger: UInt64 = 2_147_483_648

    // MARK: - delta-seconds

    /// Reads delta-seconds (RFC 9111 §1.2.2): one or more ASCII digits and nothing else.
    ///
    /// No sign, no decimal point, no exponent, no whitespace (trim before calling), no
    /// non-ASCII digits. Leading zeros are allowed. A value above 2^31, however many digits it
    /// has, saturates at `maxDeltaSeconds`, as the RFC requires of a cache.
    /// - Returns: the seconds, in `0...maxDeltaSeconds`; nil for anything that is not
    ///   delta-seconds (including the empty string).
    static func deltaSeconds(_ text: some StringProtocol) -> TimeInterval? {
        var value: UInt64 = 0
        var digits = 0
        for byte in text.utf8 {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            digits += 1
            // Stop accumulating once past the ceiling: no overflow, however long the run.
            if value <= maxDeltaInteger { value = value * 10 + UInt64(byte - 0x30) }
        }
        guard digits > 0 else { return nil }
        return TimeInterval(min(value, maxDeltaInteger))
    }

    // MARK: - Age

    /// Reads an `Age` field value (RFC 9111 §5.1).
    ///
    /// Two `Age` lines arrive folded into one list (`"5, 10"`): the first member is used and
    /// the rest discarded. Empty list members are skipped (RFC 9110 §5.6.1). The member, with
    /// its surrounding spaces and tabs removed, must be delta-seconds; anything else (`7200.0`,
    /// `nan`, `-1`, `1e3`, `inf`, empty) makes the field invalid, and an invalid `Age` is
    /// ignored.
    /// - Parameter fieldValue: the field value, or nil when the response has none.
    /// - Returns: the age in `0...maxDeltaSeconds`, or nil when absent or invalid (ignore it).
    static func age(_ fieldValue: String?) -> TimeInterval? {
        guard let fieldValue, let first = listMembers(fieldValue).first else { return nil }
        return deltaSeconds(first)
    }

    // MARK: - Content-Length

    /// Reads a `Content-Length` field value (RFC 9110 §8.6) exactly, with no ceiling below
    /// `Int.max` (a body may pass 2^31 bytes, where delta-seconds saturate).
    ///
    /// A list of identical values (`"42, 42"`, two lines folded) is that value, as §8.6
    /// allows, empty members skipped as in any list; members that differ, anything but digits,
    /// or a value beyond `Int.max` make the length unknown.
    /// - Returns: the length in bytes, or nil when absent or invalid.
    static func contentLength(_ fieldValue: String?) -> Int? {
        guard let fieldValue else { return nil }
        var length: Int?, value = 0, digits = 0, ended = false // `ended`: the member's digits are over
        func endMember() -> Bool {
            defer { (value, digits, ended) = (0, 0, false) }
            guard digits > 0 else { return true }
            guard length == nil || length == value else { return false }
            length = value
            return true
        }
        for byte in fieldValue.utf8 {
            switch byte {
            case 0x30...0x39 where !ended:
                let (times, overflowed) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflowedAdding) = times.addingReportingOverflow(Int(byte - 0x30))
                guard !overflowed, !overflowedAdding else { return nil }
                (value, digits) = (sum, digits + 1)
            case 0x20, 0x09: ended = digits > 0
            case UInt8(ascii: ","): guard endMember() else { return nil }
            default: return nil // anything else, or digits after a space inside a member
            }
        }
        return endMember() ? length : nil
    }

    // MARK: - Expires

    /// What an `Expires` field says.
    enum ExpiresValue: Equatable, Sendable {
        /// The response has no `Expires` field.
        case absent
        /// The field is present but is not one HTTP-date (`0`, `-1`, a malformed date, two
        /// dates from two `Expires` lines): the response is already expired (RFC 9111 §5.3,
        /// §4.2.1).
        case invalid
        /// The response expires at this instant.
        case date(Date)

        /// The expiry time to use in freshness arithmetic: the date when valid,
        /// `Date.distantPast` when invalid ("already expired"), nil when absent.
        var expiry: Date? {
            switch self {
            case .absent: nil
            case .invalid: .distantPast
            case .date(let date): date
            }
        }
    }

    /// Reads an `Expires` field value (RFC 9111 §5.3).
    ///
    /// The rule for the decision: when `Cache-Control` has `max-age` (or, for a shared cache,
    /// `s-maxage`), `Expires` is ignored; otherwise `.invalid` means a freshness lifetime of
    /// zero, and `.date(d)` a lifetime of `d` minus the response's `Date` (or its arrival).
    /// - Parameters:
    ///   - fieldValue: the field value, or nil when the response has none.
    ///   - now: the time a two-digit RFC 850 year is read against. The default is now.
    /// - Returns: absent, invalid, or the date.
    static func expires(_ fieldValue: String?, now: Date = Date()) -> ExpiresValue {
        guard let fieldValue else { return .absent }
        guard let date = HTTPDate.parse(fieldValue, now: now) else { return .invalid }
        return .date(date)
    }

    // MARK: - Writing Age

    /// Whole seconds of an age, rounded down and clamped: NaN or negative (including -inf) is 0;
    /// 2^31 or more (including +inf, the result of an overflowed calculation) is 2^31, as
    /// RFC 9111 §1.2.2 asks. Never traps, unlike `Int(age)` on `nan`, `inf` or `1e20`.
    static func ageSeconds(_ seconds: TimeInterval) -> Int {
        guard !seconds.isNaN, seconds > 0 else { return 0 }
        if seconds >= maxDeltaSeconds { return Int(maxDeltaInteger) }
        return Int(seconds.rounded(.down))
    }

    /// The `Age` response field value for an age in seconds: whole seconds, rounded down;
    /// `"0"` for NaN or a negative age; `"2147483648"` for anything at or beyond 2^31,
    /// infinity included.
    static func ageHeaderValue(_ seconds: TimeInterval) -> String {
        String(ageSeconds(seconds))
    }

    // MARK: - Vary

    /// Reads a `Vary` field value (RFC 9110 §12.5.5) into lower-cased field names.
    ///
    /// Members are split at commas, trimmed of spaces and tabs, and empty members dropped;
    /// `*` is kept. A member that is not a field name (a token) makes the response vary on
    /// something this cache cannot name, so it is reported as `*`: never matched, never
    /// stored, which is the safe reading.
    /// - Parameter value: the field value, or nil when the response has none.
    /// - Returns: the names in order, duplicates kept; empty when absent.
    static func varyNames(_ value: String?) -> [String] {
        guard let value else { return [] }
        return listMembers(value).map { member in
            guard member.utf8.allSatisfy(isTokenCharacter) else { return "*" }
            return asciiLowercased(member)
        }
    }

    // MARK: - Shared pieces

    /// The non-empty members of a comma-separated list, each trimmed of spaces and tabs
    /// (RFC 9110 §5.6.1). Does not know about quoted strings: for `Age` and `Vary` only.
    /// Works on bytes: a comma followed by a combining mark still separates members.
    static func listMembers(_ value: String) -> [Substring] {
        value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            .map { trimmingOWS(Substring($0)) }
            .filter { !$0.isEmpty }
    }

    /// Removes leading and trailing optional whitespace (SP and HTAB, RFC 9110 §5.6.3), byte
    /// by byte, so a space carrying a combining mark is not taken for a plain space.
    static func trimmingOWS(_ text: Substring) -> Substring {
        let bytes = text.utf8
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start = bytes.index(after: start) }
        while end > start {
            let before = bytes.index(before: end)
            guard bytes[before] == 0x20 || bytes[before] == 0x09 else { break }
            end = before
        }
        return Substring(bytes[start..<end])
    }

    /// Whether a byte may appear in a token (`tchar`, RFC 9110 §5.6.2).
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Lower-cases ASCII letters only (tokens are ASCII; no locale involved).
    static func asciiLowercased(_ text: some StringProtocol) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}
