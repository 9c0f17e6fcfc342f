import Foundation

/// The directives of a `Cache-Control` field (and `Pragma: no-cache`), parsed once.
///
/// Parsing follows RFC 9111 §5.2 and never traps, whatever the input:
/// - Directive names are tokens, compared case-insensitively (stored lower-cased).
/// - `cache-directive = token [ "=" ( token / quoted-string ) ]`, members separated by commas
///   with optional spaces or tabs around them; commas inside a quoted string do not separate.
/// - An argument may be a token or a quoted string, for every directive: the RFC asks senders
///   to use the token form for `max-age` and friends, but says recipients "ought to accept
///   both forms", so `max-age="60"` reads as 60.
/// - When a directive appears more than once, the first occurrence wins (RFC 9111 §4.2.1).
/// - A member whose name is a token but whose rest is malformed (`max-age = 60`,
///   `max-age=60 junk`, `max-age=`, an unterminated quote) is kept as present with a
///   malformed argument: `has` is true (so `no-store junk` still forbids storing) and a
///   delta-seconds reading is `.invalid` (RFC 9111 §4.2.1: treat the response as stale).
/// - A member that does not start with a token is ignored, as are unknown directives (they are
///   recorded, but nothing reads them).
struct CacheControl: Equatable {
    /// A directive's argument as it arrived.
    enum Argument: Equatable, Sendable {
        /// The directive came without `=`.
        case none
        /// The argument, unquoted if it was a quoted string.
        case value(String)
        /// The directive's name was followed by something that is not `= token` or
        /// `= quoted-string`.
        case malformed
    }

    /// A delta-seconds directive (`max-age`, `s-maxage`, `min-fresh`, `max-stale`,
    /// `stale-while-revalidate`, `stale-if-error`), as read.
    enum DeltaSeconds: Equatable, Sendable {
        /// The directive is not there.
        case absent
        /// The directive is there without an argument (`max-stale` alone means "any
        /// staleness"; for `max-age` it is invalid).
        case bare
        /// The directive is there with an argument that is not delta-seconds (`max-age=1.5`,
        /// `max-age=-1`, `max-age=abc`, malformed): invalid freshness information.
        case invalid
        /// The seconds, in `0...HTTPFieldParsing.maxDeltaSeconds` (saturated at 2^31).
        case seconds(TimeInterval)
    }

    /// Directive names, lower-cased, with their argument; the first occurrence of each.
    private(set) var directives: [String: Argument] = [:]

    /// Parses a `Cache-Control` field value, adding `no-cache` when `Pragma` lists it and there
    /// is no `Cache-Control` (RFC 9111 section 5.4: Pragma is ignored beside Cache-Control).
    /// - Parameters:
    ///   - value: the `Cache-Control` field value (several lines folded with commas), or nil.
    ///   - pragma: the `Pragma` field value, or nil.
    init(_ value: String?, pragma: String? = nil) {
        if let value { parse(Array(value.utf8)) }
        if value == nil, let pragma,
           HTTPFieldParsing.listMembers(pragma).contains(where: { HTTPFieldParsing.asciiLowercased($0) == "no-cache" }),
           !has("no-cache") {
            directives["no-cache"] = Argument.none
        }
    }

    /// Whether a directive (lower-case name) is present, with or without an argument.
    func has(_ name: String) -> Bool { directives[name] != nil }

    /// Adds a directive without an argument, as if the field had said it (unless already there).
    mutating func require(_ name: String) {
        if directives[name] == nil { directives[name] = Argument.none }
    }

    /// A directive's argument (unquoted), or nil when absent, bare or malformed.
    func argument(_ name: String) -> String? {
        if case .value(let text)? = directives[name] { return text }
        return nil
    }

    /// A delta-seconds argument; nil if absent, bare or not delta-seconds (RFC 9111 §1.2.2:
    /// digits only, saturated at 2^31). Use `delta(_:)` to tell those cases apart.
    func seconds(_ name: String) -> TimeInterval? {
        if case .seconds(let value) = delta(name) { return value }
        return nil
    }

    /// A delta-seconds directive, telling absent, bare, invalid and valid apart.
    func delta(_ name: String) -> DeltaSeconds {
        switch directives[name] {
        case nil: .absent
        case .none?: .bare
        case .malformed?: .invalid
        case .value(let text)?: HTTPFieldParsing.deltaSeconds(text).map(DeltaSeconds.seconds) ?? .invalid
        }
    }

    // MARK: - Parsing

    private static let space: UInt8 = 0x20, tab: UInt8 = 0x09, comma: UInt8 = 0x2C
    private static let equals: UInt8 = 0x3D, quote: UInt8 = 0x22, backslash: UInt8 = 0x5C

    /// Parses the members of a field value, byte by byte.
    private mutating func parse(_ bytes: [UInt8]) {
        var i = 0
        let n = bytes.count
        func skipOWS() { while i < n, bytes[i] == Self.space || bytes[i] == Self.tab { i += 1 } }
        /// Moves past the rest of a member, to its terminating comma (quote-aware).
        func skipMember() {
            var quoted = false
            while i < n {
                let byte = bytes[i]
                if quoted {
                    if byte == Self.backslash { i += 1 } else if byte == Self.quote { quoted = false }
                } else if byte == Self.quote {
                    quoted = true
                } else if byte == Self.comma {
                    return
                }
                i += 1
            }
        }
        while i < n {
            while i < n, bytes[i] == Self.space || bytes[i] == Self.tab || bytes[i] == Self.comma { i += 1 }
            guard i < n else { break }
            let nameStart = i
            while i < n, HTTPFieldParsing.isTokenCharacter(bytes[i]) { i += 1 }
            guard i > nameStart else {
                skipMember() // not a directive: ignored
                continue
            }
            let name = HTTPFieldParsing.asciiLowercased(String(decoding: bytes[nameStart..<i], as: UTF8.self))
            var argument = Argument.none
            if i < n, bytes[i] == Self.equals {
                i += 1
                if i < n, bytes[i] == Self.quote {
                    argument = Self.quotedString(bytes, at: &i).map(Argument.value) ?? .malformed
                } else {
                    let start = i
                    while i < n, HTTPFieldParsing.isTokenCharacter(bytes[i]) { i += 1 }
                    argument = i > start ? .value(String(decoding: bytes[start..<i], as: UTF8.self)) : .malformed
                }
            }
            skipOWS()
            if i < n, bytes[i] != Self.comma {
                argument = .malformed
                skipMember()
            }
            if directives[name] == nil { directives[name] = argument }
        }
    }

    /// Reads a quoted string (RFC 9110 §5.6.4) starting at the opening quote; on return `i` is
    /// past the closing quote. Nil when it is unterminated or holds a control character.
    private static func quotedString(_ bytes: [UInt8], at i: inout Int) -> String? {
        var text: [UInt8] = []
        i += 1
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            if byte == quote { return String(decoding: text, as: UTF8.self) }
            if byte == backslash {
                guard i < bytes.count, isQuotedTextOrSpace(bytes[i]) else { return nil }
                text.append(bytes[i])
                i += 1
            } else {
                guard isQuotedTextOrSpace(byte) else { return nil }
                text.append(byte)
            }
        }
        return nil
    }

    /// HTAB, SP, visible ASCII and obs-text: what a quoted string may hold.
    private static func isQuotedTextOrSpace(_ byte: UInt8) -> Bool {
        byte == tab || (byte >= 0x20 && byte != 0x7F)
    }
}

/// HTTP dates (RFC 9110 §5.6.7), read strictly and without a formatter: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Nothing else.
///
/// Decisions, each from the RFCs:
/// - Exactly the grammar's spacing and digit counts: a missing comma, an extra or missing
///   space, a one-digit hour, a two-digit year outside the RFC 850 form, dashes in
///   IMF-fixdate, trailing text (such as a second date folded in from a second `Expires`
///   line) are invalid. Leading and trailing spaces or tabs are trimmed first, since they are
///   not part of a field value (RFC 9110 §5.5).
/// - Names (`Sun`, `Nov`, `GMT`) are matched without regard to case: RFC 9110 makes HTTP-date
///   case-sensitive, but RFC 9111 §4.2 says a cache recipient SHOULD match case-insensitively.
/// - Only `GMT`: `UTC`, `Z`, `+0000`, `+1000` are invalid (RFC 9111 §4.2: a zone other than
///   GMT SHOULD be invalid for calculating expiration).
/// - Fields must be in range: day 01 up to the month's length (leap years counted), hour
///   00–23, minute 00–59, second 00–59, or 60 at 23:59 only (a leap second), read as 23:59:59,
///   the nearest representable time not after it (RFC 9111 §4.2).
/// - The day name must be a real day name of the form's kind (three letters; the full name
///   in RFC 850), but it is not checked against the date: it is redundant, the instant is
///   fully given by the rest, and RFC 9110 §5.6.7 asks recipients to be robust. A mismatch
///   does not make the instant ambiguous, so it is not worth turning a valid `Expires` into
///   "already expired".
/// - A two-digit RFC 850 year is placed so the date is not more than 50 years after `now`
///   (RFC 9110 §5.6.7): within the 100 years that end 50 years from now.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// Parses an HTTP-date, reading a two-digit RFC 850 year against the current time.
    /// - Returns: the instant, or nil when the text is not exactly one HTTP-date.
    static func parse(_ text: String) -> Date? {
        parse(text, now: Date())
    }

    /// Parses an HTTP-date, reading a two-digit RFC 850 year against `now`.
    /// - Parameters:
    ///   - text: the field value.
    ///   - now: the time a two-digit year is read against.
    /// - Returns: the instant, or nil when the text is not exactly one HTTP-date.
    static func parse(_ text: String, now: Date) -> Date? {
        let trimmed = HTTPFieldParsing.trimmingOWS(Substring(text))
        let bytes = Array(trimmed.utf8.prefix(40)) // every valid form is shorter than 40 bytes
        guard bytes.count < 40 else { return nil }
        if bytes.count == 29, bytes[3] == 0x2C { return imfFixdate(bytes) }
        if bytes.count == 24, bytes[3] == 0x20 { return asctime(bytes) }
        if let comma = bytes.firstIndex(of: 0x2C), comma >= 6 { return rfc850(bytes, comma: comma, now: now) }
        return nil
    }

    /// The IMF-fixdate form, as origins send it. Dates outside the years 1–9999 (infinities
    /// included) are clamped to them and a NaN date reads as 1970, so this never traps.
    static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        let clamped = interval.isNaN ? 0 : min(max(interval, -62_135_596_800), 253_402_300_799)
        let seconds = Int(clamped.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondsOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((days % 7) + 7) % 7]
        let name = months[month - 1].capitalized
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekday), \(two(day)) \(name) \(year) \(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60)) GMT"
    }

    // MARK: - The three forms

    /// `Sun, 06 Nov 1994 08:49:37 GMT`: 29 bytes, fixed positions.
    private static func imfFixdate(_ b: [UInt8]) -> Date? {
        guard name(b[0..<3], in: shortDays) != nil,
              b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20, b[25] == 0x20,
              let day = digits(b[5..<7]),
              let month = name(b[8..<11], in: months),
              let year = digits(b[12..<16]),
              let time = timeOfDay(b[17..<25]),
              isGMT(b[26..<29]) else { return nil }
        return instant(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994` (or `Nov 06`): 24 bytes, fixed positions, assumed UTC.
    private static func asctime(_ b: [UInt8]) -> Date? {
        guard name(b[0..<3], in: shortDays) != nil,
              b[3] == 0x20, b[7] == 0x20, b[10] == 0x20, b[19] == 0x20,
              let month = name(b[4..<7], in: months),
              let day = b[8] == 0x20 ? digits(b[9..<10]) : digits(b[8..<10]),
              let time = timeOfDay(b[11..<19]),
              let year = digits(b[20..<24]) else { return nil }
        return instant(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`: a full day name, then 23 fixed bytes.
    private static func rfc850(_ b: [UInt8], comma: Int, now: Date) -> Date? {
        let rest = b[(comma + 1)...]
        guard rest.count == 23, name(b[0..<comma], in: longDays) != nil else { return nil }
        let s = comma + 1
        guard b[s] == 0x20, b[s + 3] == 0x2D, b[s + 7] == 0x2D, b[s + 10] == 0x20, b[s + 19] == 0x20,
              let day = digits(b[(s + 1)..<(s + 3)]),
              let month = name(b[(s + 4)..<(s + 7)], in: months),
              let twoDigitYear = digits(b[(s + 8)..<(s + 10)]),
              let time = timeOfDay(b[(s + 11)..<(s + 19)]),
              isGMT(b[(s + 20)..<(s + 23)]) else { return nil }
        // Place the year within the 100 years that end 50 years from now (RFC 9110 §5.6.7).
        let nowSeconds = now.timeIntervalSince1970
        guard nowSeconds.isFinite, abs(nowSeconds) < 1e14 else { return nil }
        let nowDays = Int((nowSeconds / 86_400).rounded(.down))
        let nowCivil = civil(fromDays: nowDays)
        let limit = TimeInterval(daysFromCivil(year: nowCivil.year + 50, month: nowCivil.month, day: nowCivil.day)) * 86_400
            + (nowSeconds - TimeInterval(nowDays) * 86_400)
        // The latest valid date with these two digits that is not after the limit.
        let year = nowCivil.year - ((nowCivil.year % 100) + 100) % 100 + twoDigitYear
        for candidate in [year + 100, year, year - 100, year - 200] {
            if let date = instant(year: candidate, month: month + 1, day: day, time: time),
               date.timeIntervalSince1970 <= limit {
                return date
            }
        }
        return nil
    }

    // MARK: - Pieces

    /// The index of a name in a list of lower-case names, matched without regard to ASCII case.
    private static func name(_ bytes: ArraySlice<UInt8>, in names: [String]) -> Int? {
        let lowered = bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
        return names.firstIndex { $0.utf8.elementsEqual(lowered) }
    }

    /// Whether the bytes are `GMT`, in any case.
    private static func isGMT(_ bytes: ArraySlice<UInt8>) -> Bool {
        name(bytes, in: ["gmt"]) != nil
    }

    /// A fixed-width run of ASCII digits as a number; nil if any byte is not a digit.
    private static func digits(_ bytes: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    /// `hh:mm:ss`, each two digits, in range; 23:59:60 (a leap second) reads as 23:59:59.
    private static func timeOfDay(_ b: ArraySlice<UInt8>) -> Int? {
        let s = b.startIndex
        guard b.count == 8, b[s + 2] == 0x3A, b[s + 5] == 0x3A,
              let hour = digits(b[s..<(s + 2)]), let minute = digits(b[(s + 3)..<(s + 5)]),
              let second = digits(b[(s + 6)..<(s + 8)]),
              hour < 24, minute < 60 else { return nil }
        if second == 60 {
            guard hour == 23 && minute == 59 else { return nil }
            return hour * 3600 + minute * 60 + 59
        }
        guard second < 60 else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    /// The instant of a civil date and time of day in UTC; nil when the day is not in the month.
    private static func instant(year: Int, month: Int, day: Int, time: Int) -> Date? {
        guard month >= 1, month <= 12, day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + time))
    }

    /// The number of days in a month of the proleptic Gregorian calendar.
    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a day counted from 1970-01-01 (Howard Hinnant's algorithm).
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
