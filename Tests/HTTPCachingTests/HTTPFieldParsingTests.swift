import Foundation
import Testing
@testable import HTTPCaching

/// A UTC instant built by Foundation's calendar: an oracle independent of `HTTPDate`.
func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))!
}

/// The RFC's example instant: Sun, 06 Nov 1994 08:49:37 GMT.
let rfcExample = Date(timeIntervalSince1970: 784_111_777)

@Suite("HTTP field parsing: strict, never trapping, one row per case")
struct HTTPFieldParsingTests {
    static let ceiling: TimeInterval = 2_147_483_648

    // MARK: - delta-seconds

    @Test("RFC 9111 §1.2.2: delta-seconds is 1*DIGIT, saturating at 2^31", arguments: [
        ("0", 0), ("60", 60), ("007", 7), ("86400", 86_400),
        ("2147483647", 2_147_483_647), ("2147483648", ceiling), ("2147483649", ceiling),
        ("99999999999999999999999999", ceiling), ("18446744073709551616", ceiling),
        (String(repeating: "9", count: 10_000), ceiling),
        (String(repeating: "0", count: 10_000) + "5", 5),
    ] as [(String, TimeInterval)])
    func deltaSecondsValid(text: String, expected: TimeInterval) {
        #expect(HTTPFieldParsing.deltaSeconds(text) == expected)
        #expect(HTTPFieldParsing.deltaSeconds(Substring(text)) == expected)
    }

    @Test("RFC 9111 §1.2.2: anything but digits is not delta-seconds", arguments: [
        "", " ", " 60", "60 ", "6 0", "+60", "-1", "-0", "1.5", "7200.0", "1e3", "1E3", "0x10",
        "nan", "NaN", "inf", "infinity", "abc", "60s", "٣", "６０", "60\u{0}", "\u{0}", "6\u{301}0", "1_000",
    ])
    func deltaSecondsInvalid(text: String) {
        #expect(HTTPFieldParsing.deltaSeconds(text) == nil)
    }

    // MARK: - Content-Length

    @Test("RFC 9110 §8.6: Content-Length is exact past 2^31; identical list members are one value", arguments: [
        ("0", 0), ("42", 42), ("007", 7), (" 42\t", 42), ("2147483648", 2_147_483_648), ("2147483649", 2_147_483_649),
        ("5000000000", 5_000_000_000), ("9223372036854775807", Int.max), ("42, 42", 42), ("42,42", 42), ("42, , 42,", 42),
    ] as [(String, Int)])
    func contentLengthValid(field: String, expected: Int) {
        #expect(HTTPFieldParsing.contentLength(field) == expected)
    }

    @Test("RFC 9110 §8.6: anything else leaves the length unknown", arguments: [
        "", " ", ",", "-1", "+5", "1.5", "1e3", "0x10", "4 2", "٣", "42, 43", "42, x", "9223372036854775808",
        "99999999999999999999", String(repeating: "9", count: 10_000),
    ])
    func contentLengthInvalid(field: String) {
        #expect(HTTPFieldParsing.contentLength(field) == nil)
        #expect(HTTPFieldParsing.contentLength(nil) == nil)
    }

    @Test("Content-Length: every field of up to five bytes from digits, spaces, tabs, commas and a letter reads as a plain reference reads it")
    func contentLengthAgainstReference() {
        func reference(_ field: String) -> Int? {
            let members = field.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed() }
                .filter { !$0.isEmpty }
            let values = members.map { member in member.allSatisfy { ("0"..."9").contains($0) } ? Int(String(member)) : nil }
            guard let first = values.first, values.allSatisfy({ $0 != nil && $0 == first }) else { return nil }
            return first
        }
        var fields = [""], layer = [""]
        for _ in 0..<5 {
            layer = layer.flatMap { field in ["0", "7", " ", "\t", ",", "x"].map { field + $0 } }
            fields += layer
        }
        #expect(fields.count == 9331)
        for field in fields where HTTPFieldParsing.contentLength(field) != reference(field) {
            Issue.record("\(field.debugDescription): \(String(describing: HTTPFieldParsing.contentLength(field))), the reference \(String(describing: reference(field)))")
        }
    }

    // MARK: - Age

    @Test("RFC 9111 §5.1: Age is delta-seconds; a list uses its first member", arguments: [
        ("60", 60), ("0", 0), (" 60 ", 60), ("\t60\t", 60),
        ("5, 10", 5), ("5,10", 5), ("10, 5", 10), ("5, nan", 5),
        (", 7", 7), (" ,, 7, 8", 7),
        ("99999999999", ceiling), ("2147483648", ceiling),
    ] as [(String, TimeInterval)])
    func ageValid(field: String, expected: TimeInterval) {
        #expect(HTTPFieldParsing.age(field) == expected)
    }

    @Test("RFC 9111 §5.1: an invalid Age is ignored (nil)", arguments: [
        nil, "", " ", ",", "nan", "inf", "-inf", "-1", "7200.0", "1e3", "+5", "abc", "abc, 5",
        "1 2", "0x1F", "5;q=1", "\"5\"", "５",
    ] as [String?])
    func ageInvalid(field: String?) {
        #expect(HTTPFieldParsing.age(field) == nil)
    }

    // MARK: - Expires

    @Test("RFC 9111 §5.3: Expires is absent, a date, or invalid meaning already expired", arguments: [
        (nil, .absent),
        ("Sun, 06 Nov 1994 08:49:37 GMT", .date(rfcExample)),
        ("Sunday, 06-Nov-94 08:49:37 GMT", .date(rfcExample)),
        ("Sun Nov  6 08:49:37 1994", .date(rfcExample)),
        ("0", .invalid), ("-1", .invalid), ("", .invalid), ("never", .invalid),
        ("Sun, 06 Nov 1994 08:49:37 UTC", .invalid),
        ("Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT", .invalid),
    ] as [(String?, HTTPFieldParsing.ExpiresValue)])
    func expires(field: String?, expected: HTTPFieldParsing.ExpiresValue) {
        #expect(HTTPFieldParsing.expires(field, now: utc(2026, 1, 1)) == expected)
    }

    @Test("RFC 9111 §5.3: the expiry of an invalid Expires is in the past; absent has none")
    func expiry() {
        #expect(HTTPFieldParsing.ExpiresValue.absent.expiry == nil)
        #expect(HTTPFieldParsing.ExpiresValue.invalid.expiry == .distantPast)
        #expect(HTTPFieldParsing.ExpiresValue.date(rfcExample).expiry == rfcExample)
    }

    // MARK: - HTTP-date

    @Test("RFC 9110 §5.6.7: the three HTTP-date forms, in range", arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", rfcExample),
        ("Sunday, 06-Nov-94 08:49:37 GMT", rfcExample),
        ("Sun Nov  6 08:49:37 1994", rfcExample),
        ("Sun Nov 06 08:49:37 1994", rfcExample),
        ("Thu, 01 Jan 1970 00:00:00 GMT", Date(timeIntervalSince1970: 0)),
        ("Wed, 31 Dec 1969 23:59:59 GMT", Date(timeIntervalSince1970: -1)),
        ("Thu, 29 Feb 2024 12:00:00 GMT", utc(2024, 2, 29, 12)),
        ("Tue, 29 Feb 2000 00:00:00 GMT", utc(2000, 2, 29)),
        ("Fri, 31 Dec 9999 23:59:59 GMT", Date(timeIntervalSince1970: 253_402_300_799)),
        ("Mon, 01 Jan 1600 00:00:00 GMT", utc(1600, 1, 1)),
        ("Thu Feb 29 23:59:59 2024", utc(2024, 2, 29, 23, 59, 59)),
        ("Saturday, 31-Dec-16 00:00:00 GMT", utc(2016, 12, 31)),
    ])
    func datesValid(text: String, expected: Date) {
        #expect(HTTPDate.parse(text, now: utc(2026, 1, 1)) == expected)
    }

    @Test("RFC 9111 §4.2: a cache matches names case-insensitively and trims the field's OWS", arguments: [
        "sun, 06 nov 1994 08:49:37 gmt", "SUN, 06 NOV 1994 08:49:37 GMT", "SUNDAY, 06-NOV-94 08:49:37 gmt",
        "sun nov  6 08:49:37 1994", " Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\t",
    ])
    func datesCaseAndOWS(text: String) {
        #expect(HTTPDate.parse(text, now: utc(2026, 1, 1)) == rfcExample)
    }

    @Test("RFC 9110 §5.6.7: a day name that does not match the date is accepted (documented choice)", arguments: [
        "Mon, 06 Nov 1994 08:49:37 GMT", "Friday, 06-Nov-94 08:49:37 GMT", "Wed Nov  6 08:49:37 1994",
    ])
    func weekdayNotChecked(text: String) {
        #expect(HTTPDate.parse(text, now: utc(2026, 1, 1)) == rfcExample)
    }

    @Test("RFC 9110 §5.6.7 and RFC 9111 §4.2: a leap second 23:59:60 reads as 23:59:59, the time just before", arguments: [
        "Sat, 31 Dec 2016 23:59:60 GMT", "Saturday, 31-Dec-16 23:59:60 GMT", "Sat Dec 31 23:59:60 2016",
    ])
    func leapSecond(text: String) {
        #expect(HTTPDate.parse(text, now: utc(2026, 1, 1)) == utc(2016, 12, 31, 23, 59, 59))
    }

    @Test("RFC 9110 §5.6.7: anything but exactly one HTTP-date is invalid", arguments: [
        // Zones other than GMT.
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 06 Nov 1994 08:49:37 +1000",
        "Sun, 06 Nov 1994 08:49:37 Z", "Sun, 06 Nov 1994 08:49:37", "Sunday, 06-Nov-94 08:49:37 UTC",
        "Sun Nov  6 08:49:37 1994 GMT",
        // Years of the wrong width for the form.
        "Sun, 06 Nov 94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov  6 08:49:37 94",
        "Sun, 06 Nov 01994 08:49:37 GMT", "Sun, 06 Nov +994 08:49:37 GMT",
        // Punctuation and spacing.
        "Sun 06 Nov 1994 08:49:37 GMT", "Sun,  06 Nov 1994 08:49:37 GMT", "Sun,06 Nov 1994 08:49:37 GMT",
        "Sun, 06-Nov-1994 08:49:37 GMT", "Sun, 06 Nov 1994  08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37  GMT",
        "Sun, 06  Nov 1994 08:49:37 GMT", "Sunday,06-Nov-94 08:49:37 GMT", "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sun Nov 6 08:49:37 1994", "Sun  Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08.49.37 GMT",
        "Sun, 06 Nov 1994 08:49:37.5 GMT", "Sun, 06 Nov 1994 08:49:37 GMTX",
        // Digit counts.
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:9:37 GMT",
        "Sun, 06 Nov 1994 08:49:7 GMT", "Sunday, 6-Nov-94 08:49:37 GMT", "Sun Nov  6 8:49:37 1994",
        // Names.
        "Sux, 06 Nov 1994 08:49:37 GMT", "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 November 1994 08:49:37 GMT", "Sundae, 06-Nov-94 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 gmt+1",
        // Out of range.
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 32 Oct 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT",
        "Thu, 29 Feb 1900 08:49:37 GMT", "Wed, 29 Feb 2023 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 06 Nov 1994 08:49:60 GMT",
        "Sun, 06 Nov 1994 23:58:60 GMT", "Sun Nov 00 08:49:37 1994", "Sunday, 31-Apr-94 08:49:37 GMT",
        // Two dates folded from two lines, and other text.
        "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 GMT,Sun, 06 Nov 1994 08:49:37 GMT",
        "", " ", "0", "-1", "not a date", "1994-11-06T08:49:37Z", "784111777",
        "Sun, 06 Nov 1994 08:49:37 GMT\u{0}", "Sun, ０６ Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 G\u{301}MT",
        "\u{0}Sun, 06 Nov 1994 08:49:37 GMT", "Sun,\u{A0}06 Nov 1994 08:49:37 GMT",
    ])
    func datesInvalid(text: String) {
        #expect(HTTPDate.parse(text, now: utc(2026, 1, 1)) == nil)
    }

    @Test("RFC 9110 §5.6.7: a two-digit RFC 850 year is never more than 50 years in the future", arguments: [
        (utc(2026, 1, 1), "Sunday, 06-Nov-94 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 37)),
        (utc(2026, 1, 1), "Monday, 01-Jan-30 00:00:00 GMT", utc(2030, 1, 1)),
        (utc(2026, 1, 1), "Monday, 01-Jan-00 00:00:00 GMT", utc(2000, 1, 1)),
        (utc(2026, 1, 1), "Monday, 31-Dec-75 23:59:59 GMT", utc(2075, 12, 31, 23, 59, 59)),
        (utc(2026, 1, 1), "Monday, 01-Jan-76 00:00:00 GMT", utc(2076, 1, 1)),   // exactly 50 years: not more
        (utc(2026, 1, 1), "Monday, 01-Jan-76 00:00:01 GMT", utc(1976, 1, 1, 0, 0, 1)),
        (utc(2026, 1, 1), "Monday, 02-Jan-76 00:00:00 GMT", utc(1976, 1, 2)),
        (utc(1994, 11, 6), "Monday, 01-Jan-44 00:00:00 GMT", utc(2044, 1, 1)),
        (utc(1994, 11, 6), "Monday, 01-Dec-44 00:00:00 GMT", utc(1944, 12, 1)),
        (utc(2090, 6, 1), "Monday, 01-Jan-50 00:00:00 GMT", utc(2050, 1, 1)),
        (utc(2090, 6, 1), "Monday, 01-Jan-20 00:00:00 GMT", utc(2120, 1, 1)),
        (utc(2026, 1, 1), "Tuesday, 29-Feb-00 00:00:00 GMT", utc(2000, 2, 29)),
        (utc(2026, 1, 1), "Thursday, 29-Feb-24 00:00:00 GMT", utc(2024, 2, 29)),
    ] as [(Date, String, Date)])
    func rfc850Years(now: Date, text: String, expected: Date) {
        #expect(HTTPDate.parse(text, now: now) == expected)
    }

    @Test("RFC 9110 §5.6.7: a 29 February no candidate year has is invalid")
    func rfc850ImpossibleLeapDay() {
        // 2023 is not a leap year, and neither is 1923 nor 2123: no 29-Feb-23 exists near 2026.
        #expect(HTTPDate.parse("Wednesday, 29-Feb-23 00:00:00 GMT", now: utc(2026, 1, 1)) == nil)
    }

    @Test("RFC 9110 §5.6.7: IMF-fixdate round trips through format and parse", arguments: [
        0, 784_111_777, -1, 951_782_400, 1_700_000_000, 253_402_300_799, -2_208_988_800,
    ] as [TimeInterval])
    func roundTrip(seconds: TimeInterval) {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
    }

    // Seconds, not dates, in the table: Foundation's own `Date.description` traps on a NaN date.
    @Test("format never traps, clamping dates it cannot write", arguments: [
        (.nan, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (.infinity, "Fri, 31 Dec 9999 23:59:59 GMT"),
        (-.infinity, "Mon, 01 Jan 1 00:00:00 GMT"),
        (1e300, "Fri, 31 Dec 9999 23:59:59 GMT"),
        (784_111_777.9, "Sun, 06 Nov 1994 08:49:37 GMT"),
    ] as [(TimeInterval, String)])
    func formatClamps(seconds: TimeInterval, expected: String) {
        #expect(HTTPDate.format(Date(timeIntervalSince1970: seconds)) == expected)
    }

    // MARK: - Cache-Control

    @Test("RFC 9111 §5.2, §4.2.1: delta-seconds directives, first occurrence wins", arguments: [
        ("max-age=60", .seconds(60)),
        ("MAX-AGE=60", .seconds(60)),
        ("Max-Age=60 , private", .seconds(60)),
        ("max-age=\"60\"", .seconds(60)),                       // §5.2: recipients accept both forms
        ("max-age=60, max-age=10", .seconds(60)),
        ("max-age=10, max-age=60", .seconds(10)),
        ("max-age=abc, max-age=60", .invalid),
        ("max-age, max-age=60", .bare),
        ("max-age", .bare),
        ("max-age=", .invalid),
        ("max-age= 60", .invalid),
        ("max-age =60", .invalid),
        ("max-age=60 junk", .invalid),
        ("max-age=60;x", .invalid),
        ("max-age=1.5", .invalid),
        ("max-age=-1", .invalid),
        ("max-age=+5", .invalid),
        ("max-age=1e3", .invalid),
        ("max-age=nan", .invalid),
        ("max-age=\"6 0\"", .invalid),
        ("max-age=\"60", .invalid),
        ("max-age=\"\"", .invalid),
        ("max-age=99999999999999999999", .seconds(ceiling)),
        ("max-age=2147483648", .seconds(ceiling)),
        ("max-age=\"6\\0\"", .seconds(60)),                      // a quoted-pair stands for its octet
        ("no-cache=\"a, max-age=5\", max-age=7", .seconds(7)),  // commas in quotes do not split
        ("no-cache=\"a\\\", max-age=5\", max-age=7", .seconds(7)),
        (",,, max-age=5 ,,", .seconds(5)),
        ("\tmax-age=5\t", .seconds(5)),
        ("private,max-age=5", .seconds(5)),
        ("\"max-age=5\", max-age=6", .seconds(6)),
        ("", .absent),
        ("s-maxage=5", .absent),
        ("x-max-age=5", .absent),
        ("max\u{2010}age=5", .absent),
        ("foo=bar", .absent),
    ] as [(String, CacheControl.DeltaSeconds)])
    func maxAge(field: String, expected: CacheControl.DeltaSeconds) {
        let directives = CacheControl(field)
        #expect(directives.delta("max-age") == expected)
        if case .seconds(let value) = expected {
            #expect(directives.seconds("max-age") == value)
        } else {
            #expect(directives.seconds("max-age") == nil)
        }
    }

    @Test("RFC 9111 §5.2: directive presence, case-insensitive, unknown ones harmless", arguments: [
        ("no-store", "no-store", true),
        ("No-Store", "no-store", true),
        ("no-store junk", "no-store", true),            // malformed, but present: still forbids storing
        ("no-store=\"x\"", "no-store", true),
        ("private, no-store", "no-store", true),
        ("\"no-store\"", "no-store", false),
        ("x-no-store", "no-store", false),
        ("no-cache=\"Set-Cookie, no-store\"", "no-store", false),
        ("must-revalidate", "must-revalidate", true),
        ("foo, bar=baz, must-revalidate", "must-revalidate", true),
        ("immutable, stale-while-revalidate=30", "stale-while-revalidate", true),
        ("", "no-cache", false),
    ] as [(String, String, Bool)])
    func presence(field: String, name: String, expected: Bool) {
        #expect(CacheControl(field).has(name) == expected)
    }

    @Test("RFC 9111 §5.2: arguments are unquoted; a qualified no-cache keeps its field list")
    func arguments() {
        let directives = CacheControl(#"no-cache="Set-Cookie, X", private, ext="a\"b", stale-if-error=abc"#)
        #expect(directives.argument("no-cache") == "Set-Cookie, X")
        #expect(directives.argument("ext") == "a\"b")
        #expect(directives.argument("private") == nil)
        #expect(directives.delta("stale-if-error") == .invalid)
        #expect(directives.delta("max-stale") == .absent)
    }

    @Test("RFC 9111 §5.4: Pragma: no-cache adds no-cache, and is ignored beside Cache-Control", arguments: [
        (nil, "no-cache", true), (nil, "No-Cache", true), (nil, "x, no-cache", true), ("max-age=5", "no-cache", false),
        (nil, "no-cache=1", false), (nil, "", false), (nil, "nocache", false),
    ] as [(String?, String, Bool)])
    func pragma(field: String?, pragma: String, expected: Bool) {
        #expect(CacheControl(field, pragma: pragma).has("no-cache") == expected)
    }

    @Test("require adds a bare directive but keeps one already there")
    func require() {
        var directives = CacheControl("max-age=5")
        directives.require("no-cache")
        directives.require("max-age")
        #expect(directives.has("no-cache"))
        #expect(directives.seconds("max-age") == 5)
    }

    // MARK: - Age header and Vary

    @Test("RFC 9111 §5.1, §1.2.2: the Age a cache sends is whole seconds, never negative, at most 2^31", arguments: [
        (0, "0"), (4.0, "4"), (4.9, "4"), (59.999, "59"), (-1, "0"), (-0.5, "0"), (.nan, "0"), (-.nan, "0"),
        (.infinity, "2147483648"), (-.infinity, "0"), (1e20, "2147483648"), (2_147_483_647.9, "2147483647"),
        (2_147_483_648, "2147483648"), (.greatestFiniteMagnitude, "2147483648"), (.leastNonzeroMagnitude, "0"),
    ] as [(TimeInterval, String)])
    func ageHeaderValue(seconds: TimeInterval, expected: String) {
        #expect(HTTPFieldParsing.ageHeaderValue(seconds) == expected)
        #expect(String(HTTPFieldParsing.ageSeconds(seconds)) == expected)
    }

    @Test("RFC 9110 §12.5.5: Vary names, lower-cased; * kept; a non-name counts as *", arguments: [
        (nil, []), ("", []), (" ", []), (",,", []),
        ("Accept-Encoding", ["accept-encoding"]),
        ("Accept-Language, Accept", ["accept-language", "accept"]),
        ("*", ["*"]), ("*, Accept", ["*", "accept"]),
        (" , ,Accept,, ", ["accept"]), ("\tAccept\t", ["accept"]),
        ("ACCEPT,accept", ["accept", "accept"]),
        ("Accept Language", ["*"]), ("\"x\"", ["*"]), ("Äccept", ["*"]), ("Accept;q=1", ["*"]),
    ] as [(String?, [String])])
    func vary(field: String?, expected: [String]) {
        #expect(HTTPFieldParsing.varyNames(field) == expected)
    }
}
