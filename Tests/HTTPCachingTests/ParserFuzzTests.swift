import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// Random field values: noise, and mutations of valid ones.
struct FieldFuzzer {
    var random: SeededGenerator

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    /// Valid values of every field under test, to mutate.
    static let seeds = [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "Thu, 29 Feb 2024 23:59:60 GMT", "max-age=60", "max-age=60, public", "no-cache=\"Set-Cookie, X\", private",
        "max-age=\"60\", must-revalidate", "stale-while-revalidate=30, stale-if-error=86400", "no-store",
        "60", "5, 10", "2147483648", "Accept-Encoding", "Accept-Language, Accept", "*", "0",
    ]

    /// Characters that matter to the parsers, and some that should never.
    static let alphabet: [Character] = Array("0123456789 \t,;=\"\\-:+.eE") + [
        "a", "G", "M", "T", "S", "u", "n", "N", "o", "v", "x", "*", "\u{0}", "\u{1}", "\u{7F}", "\r", "\n",
        "é", "\u{301}", "٣", "６", "🦊", "\u{A0}", "\u{2028}", "\u{FFFD}", "\u{200B}",
    ]

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    mutating func character() -> Character {
        if int(0...9) < 8 { return Self.alphabet[int(0...(Self.alphabet.count - 1))] }
        // Any Unicode scalar but a surrogate.
        while true {
            if let scalar = Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &random)) { return Character(scalar) }
        }
    }

    /// A random string: noise, a long digit run, or a mutated valid value.
    mutating func string() -> String {
        switch int(0...9) {
        case 0:
            return String((0..<int(0...40)).map { _ in character() })
        case 1:
            let digits = String((0..<int(1...3000)).map { _ in Character(String(int(0...9))) })
            return [digits, "max-age=" + digits, digits + ", 5", " " + digits, digits + ".0"][int(0...4)]
        default:
            return mutate(Self.seeds[int(0...(Self.seeds.count - 1))])
        }
    }

    /// A valid value with one to four edits: insert, delete, replace, duplicate, or join.
    mutating func mutate(_ value: String) -> String {
        var characters = Array(value)
        for _ in 0..<int(1...4) {
            let position = characters.isEmpty ? 0 : int(0...(characters.count - 1))
            switch int(0...5) {
            case 0: characters.insert(character(), at: int(0...characters.count))
            case 1: if !characters.isEmpty { characters.remove(at: position) }
            case 2: if !characters.isEmpty { characters[position] = character() }
            case 3:
                let end = min(characters.count, position + int(1...8))
                characters.insert(contentsOf: characters[position..<end], at: position)
            case 4: characters += Array(", ") + Array(Self.seeds[int(0...(Self.seeds.count - 1))])
            default: characters = characters.flatMap { $0.isLetter && int(0...1) == 0 ? Array($0.uppercased()) : [$0] }
            }
        }
        return String(characters)
    }
}

@Suite("Parser fuzzing: no trap, no hang, results in range")
struct ParserFuzzTests {
    /// Two fixed seeds (the same cases every run) and three fresh ones; a failure names its seed and case.
    static let seeds = FuzzCases.seeds([0x5EED_0F_CAC4E, 20_260_101], fresh: 3)
    /// Each seed runs this many cases, then more, up to `maximumCases`, while within `budget`.
    static let minimumCases = 200
    static let maximumCases = 1_500
    static let budget: Duration = .milliseconds(200)
    static let ceiling: TimeInterval = 2_147_483_648
    static let now = Date(timeIntervalSince1970: 1_767_225_600) // 2026-01-01

    /// Runs `check` on random strings, each with the label that names its case, and fails if
    /// one call took long enough to count as a hang: 5 s, far above any linear parse of the
    /// largest input (256 KB) even on a loaded machine, far below what a quadratic one would
    /// take; a true endless loop never returns and fails the run by its time limit.
    func fuzz(seed: UInt64, _ check: (_ input: String, _ label: String) -> Void) {
        var slowest: (seconds: TimeInterval, label: String) = (0, "")
        let ran = FuzzCases(seed: seed, minimum: Self.minimumCases, maximum: Self.maximumCases, budget: Self.budget).run { fuzzCase in
            var fuzzer = FieldFuzzer(seed: fuzzCase.seed)
            let input = fuzzer.string()
            let before = Date()
            check(input, fuzzCase.label)
            let seconds = Date().timeIntervalSince(before)
            if seconds > slowest.seconds { slowest = (seconds, fuzzCase.label) }
        }
        #expect(ran >= Self.minimumCases)
        #expect(slowest.seconds < 5, "\(slowest.label): one call took \(slowest.seconds) s")
    }

    func inRange(_ value: TimeInterval?) -> Bool {
        guard let value else { return true }
        return value.isFinite && value >= 0 && value <= Self.ceiling
    }

    @Test("deltaSeconds: nil unless all ASCII digits; else finite in 0...2^31", arguments: seeds)
    func deltaSeconds(seed: UInt64) {
        fuzz(seed: seed) { input, label in
            let value = HTTPFieldParsing.deltaSeconds(input)
            let digitsOnly = !input.isEmpty && input.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            #expect((value != nil) == digitsOnly, "\(label) input \(input.debugDescription)")
            #expect(inRange(value), "\(label) input \(input.debugDescription)")
        }
    }

    @Test("age: nil or finite in 0...2^31, and equal to its first member's delta-seconds", arguments: seeds)
    func age(seed: UInt64) {
        fuzz(seed: seed) { input, label in
            let value = HTTPFieldParsing.age(input)
            #expect(inRange(value), "\(label) input \(input.debugDescription)")
            let first = HTTPFieldParsing.listMembers(input).first
            #expect(value == first.flatMap { HTTPFieldParsing.deltaSeconds($0) }, "\(label) input \(input.debugDescription)")
        }
    }

    @Test("Cache-Control: every delta-seconds directive in range, and parsing is deterministic", arguments: seeds)
    func cacheControl(seed: UInt64) {
        let names = ["max-age", "s-maxage", "min-fresh", "max-stale", "stale-while-revalidate", "stale-if-error"]
        fuzz(seed: seed) { input, label in
            let directives = CacheControl(input, pragma: input)
            #expect(directives == CacheControl(input, pragma: input), "\(label)")
            for name in names {
                let seconds = directives.seconds(name)
                #expect(inRange(seconds), "\(label) input \(input.debugDescription)")
                #expect((seconds != nil) == (directives.delta(name) != .absent && directives.delta(name) != .bare
                    && directives.delta(name) != .invalid), "\(label) input \(input.debugDescription)")
                if directives.delta(name) != .absent { #expect(directives.has(name), "\(label)") }
            }
        }
    }

    @Test("HTTP-date: nil, or an instant in years 0-9999 that formats and parses back to itself", arguments: seeds)
    func httpDate(seed: UInt64) {
        fuzz(seed: seed) { input, label in
            guard let date = HTTPDate.parse(input, now: Self.now) else { return }
            let seconds = date.timeIntervalSince1970
            #expect(seconds.isFinite && seconds >= -62_167_219_200 && seconds <= 253_402_300_799,
                    "\(label) input \(input.debugDescription)")
            #expect(seconds == seconds.rounded(.down), "\(label) input \(input.debugDescription)")
            if seconds >= -30_610_224_000 { // years before 1000 have fewer than four digits in `format`
                #expect(HTTPDate.parse(HTTPDate.format(date), now: Self.now) == date, "\(label) input \(input.debugDescription)")
            }
        }
    }

    @Test("Expires: never absent when present; a date exactly when HTTP-date parses", arguments: seeds)
    func expires(seed: UInt64) {
        fuzz(seed: seed) { input, label in
            let value = HTTPFieldParsing.expires(input, now: Self.now)
            switch value {
            case .absent: Issue.record("\(label): a present Expires read as absent: \(input.debugDescription)")
            case .invalid: #expect(HTTPDate.parse(input, now: Self.now) == nil, "\(label)")
            case .date(let date): #expect(HTTPDate.parse(input, now: Self.now) == date, "\(label)")
            }
        }
    }

    @Test("Vary: each name is * or a non-empty lower-case token", arguments: seeds)
    func vary(seed: UInt64) {
        fuzz(seed: seed) { input, label in
            for name in HTTPFieldParsing.varyNames(input) {
                let isToken = !name.isEmpty && name.utf8.allSatisfy { HTTPFieldParsing.isTokenCharacter($0) && !($0 >= 0x41 && $0 <= 0x5A) }
                #expect(isToken, "\(label) input \(input.debugDescription) name \(name.debugDescription)")
            }
        }
    }

    @Test("ageHeaderValue: any double, any bit pattern, gives digits in 0...2^31", arguments: seeds)
    func ageHeaderValue(seed: UInt64) {
        let specials: [TimeInterval] = [.nan, -.nan, .signalingNaN, .infinity, -.infinity, .greatestFiniteMagnitude,
                                        -.greatestFiniteMagnitude, .leastNonzeroMagnitude, -0.0, 0, 2_147_483_648, 2_147_483_647.999]
        for seconds in specials { checkAgeHeaderValue(seconds, "special") }
        FuzzCases(seed: seed, minimum: Self.maximumCases).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let seconds = fuzzCase.index % 2 == 0 ? TimeInterval(bitPattern: random.next()) : TimeInterval.random(in: -1e10...1e10, using: &random)
            checkAgeHeaderValue(seconds, fuzzCase.label)
        }
    }

    func checkAgeHeaderValue(_ seconds: TimeInterval, _ label: String) {
        let text = HTTPFieldParsing.ageHeaderValue(seconds)
        let value = HTTPFieldParsing.deltaSeconds(text)
        #expect(value != nil && inRange(value), "\(label): seconds \(seconds.bitPattern) gave \(text)")
        if seconds.isFinite && seconds >= 0 && seconds < Self.ceiling {
            #expect(value == seconds.rounded(.down), "\(label): seconds \(seconds)")
        }
    }

    @Test("format then parse is the identity for whole-second dates in years 1000-9999", arguments: seeds)
    func roundTrip(seed: UInt64) {
        FuzzCases(seed: seed, minimum: Self.maximumCases).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let seconds = TimeInterval(Int64.random(in: -30_610_224_000...253_402_300_799, using: &random))
            let date = Date(timeIntervalSince1970: seconds)
            #expect(HTTPDate.parse(HTTPDate.format(date), now: Self.now) == date, "\(fuzzCase.label): seconds \(seconds)")
        }
    }

    @Test("huge inputs end quickly: 256 KB of digits, spaces, commas or quotes")
    func hugeInputs() {
        let size = 1 << 18
        let inputs = [String(repeating: "9", count: size), String(repeating: " ", count: size),
                      String(repeating: ",", count: size), String(repeating: "\"", count: size),
                      "max-age=" + String(repeating: "9", count: size),
                      String(repeating: "max-age=1, ", count: size / 11)]
        for input in inputs {
            let start = Date()
            _ = HTTPFieldParsing.deltaSeconds(input)
            _ = HTTPFieldParsing.age(input)
            _ = HTTPFieldParsing.varyNames(input)
            _ = HTTPFieldParsing.expires(input)
            let directives = CacheControl(input)
            #expect(inRange(directives.seconds("max-age")))
            #expect(Date().timeIntervalSince(start) < 5, "input of \(input.utf8.count) bytes starting \(input.prefix(12))")
        }
        #expect(HTTPFieldParsing.deltaSeconds(String(repeating: "9", count: size)) == Self.ceiling)
        #expect(CacheControl("max-age=" + String(repeating: "9", count: size)).seconds("max-age") == Self.ceiling)
    }
}
