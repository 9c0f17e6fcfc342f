import Foundation

/// The directives of a `Cache-Control` field (and `Pragma: no-cache`), parsed once.
struct CacheControl: Equatable {
    /// Directive names, lower-cased, with their argument if any.
    private(set) var directives: [String: String] = [:]
    private(set) var flags: Set<String> = []

    init(_ value: String?, pragma: String? = nil) {
        if let value { parse(value) }
        if let pragma, pragma.lowercased().split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "no-cache" }),
           !has("no-cache") {
            flags.insert("no-cache")
        }
    }

    func has(_ name: String) -> Bool { flags.contains(name) || directives[name] != nil }

    /// Adds a directive without an argument, as if the field had said it.
    mutating func require(_ name: String) { flags.insert(name) }

    /// A delta-seconds argument; nil if absent or not a non-negative integer.
    func seconds(_ name: String) -> TimeInterval? {
        guard let argument = directives[name], let value = UInt64(argument) else { return nil }
        return TimeInterval(value)
    }

    private mutating func parse(_ value: String) {
        var rest = Substring(value)
        while !rest.isEmpty {
            // One directive: token [ "=" ( token / quoted-string ) ], up to the next comma.
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            let name = rest.prefix { $0 != "=" && $0 != "," && $0 != " " && $0 != "\t" }
            rest = rest.dropFirst(name.count).drop { $0 == " " || $0 == "\t" }
            var argument: String?
            if rest.first == "=" {
                rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
                if rest.first == "\"" {
                    var text = "", escaped = false
                    rest = rest.dropFirst()
                    while let character = rest.first {
                        rest = rest.dropFirst()
                        if escaped { text.append(character); escaped = false }
                        else if character == "\\" { escaped = true }
                        else if character == "\"" { break }
                        else { text.append(character) }
                    }
                    argument = text
                } else {
                    let token = rest.prefix { $0 != "," && $0 != " " && $0 != "\t" }
                    argument = String(token)
                    rest = rest.dropFirst(token.count)
                }
            }
            rest = rest.drop { $0 != "," }
            let key = name.lowercased()
            guard !key.isEmpty else { continue }
            if let argument { directives[key] = argument } else { flags.insert(key) }
        }
    }
}

/// HTTP dates (RFC 9110 section 5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime
/// forms, parsed without a formatter.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ text: String) -> Date? {
        let parts = text.replacingOccurrences(of: ",", with: " ").replacingOccurrences(of: "-", with: " ")
            .split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        var day: Int?, month: Int?, year: Int?, time: [Int]?
        for part in parts {
            if part.contains(":") {
                let fields = part.split(separator: ":").compactMap { Int($0) }
                guard fields.count == 3 else { return nil }
                time = fields
            } else if let index = months.firstIndex(of: part.lowercased()) {
                month = index + 1
            } else if let number = Int(part) {
                if day == nil && part.count <= 2 && number >= 1 && number <= 31 { day = number }
                else if part.count == 4 || part.count == 2 { year = part.count == 2 ? (number < 70 ? 2000 + number : 1900 + number) : number }
            }
        }
        guard let day, let month, let year, let time, time[0] < 24, time[1] < 60, time[2] < 61 else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm), then seconds since 1970.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]))
    }

    /// The IMF-fixdate form, as origins send it.
    static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondsOfDay = seconds - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((days % 7) + 7) % 7]
        let name = months[month - 1].capitalized
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekday), \(two(day)) \(name) \(year) \(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60)) GMT"
    }
}
