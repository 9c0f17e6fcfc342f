import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// The RESP2 parser and command encoding, without a server.
@Suite("Redis RESP2 parser")
struct RedisRESPTests {
    /// Parses bytes fed in one piece (`⏎` stands for CRLF, `␍` for CR and `␊` for LF, so the
    /// test names stay readable).
    static func parseAll(_ text: String, limits: RESPParser.Limits = RESPParser.Limits()) throws -> [RESPValue] {
        var parser = RESPParser(limits: limits)
        parser.append(Array(text.replacingOccurrences(of: "⏎", with: "\r\n").replacingOccurrences(of: "␍", with: "\r")
            .replacingOccurrences(of: "␊", with: "\n").utf8))
        var values: [RESPValue] = []
        while let value = try parser.next() { values.append(value) }
        return values
    }

    @Test("reads every RESP2 type, nulls, empty and binary bulk strings, and nested arrays", arguments: [
        ("+OK⏎", RESPValue.simpleString("OK")),
        ("-ERR wrong⏎", .error("ERR wrong")),
        (":42⏎", .integer(42)),
        (":-7⏎", .integer(-7)),
        (":9223372036854775807⏎", .integer(.max)),
        ("$3⏎abc⏎", .bulkString(Array("abc".utf8))),
        ("$0⏎⏎", .bulkString([])),
        ("$4⏎a⏎b⏎", .bulkString(Array("a\r\nb".utf8))),
        ("$-1⏎", .bulkString(nil)),
        ("*-1⏎", .array(nil)),
        ("*0⏎", .array([])),
        ("*2⏎*1⏎:1⏎$1⏎x⏎", .array([.array([.integer(1)]), .bulkString(Array("x".utf8))])),
    ])
    func types(text: String, expected: RESPValue) throws {
        #expect(try Self.parseAll(text) == [expected])
    }

    @Test("a reply split across many reads is taken only when whole, whatever the split")
    func partialReads() throws {
        let wire = "*3\r\n$5\r\nhello\r\n:12\r\n*2\r\n+OK\r\n$-1\r\n"
        let expected = RESPValue.array([.bulkString(Array("hello".utf8)), .integer(12), .array([.simpleString("OK"), .bulkString(nil)])])
        // One byte at a time: nothing until the last byte.
        var parser = RESPParser()
        let bytes = Array(wire.utf8)
        for (index, byte) in bytes.enumerated() {
            parser.append([byte])
            let value = try parser.next()
            #expect((value == nil) == (index < bytes.count - 1), "after \(index + 1) of \(bytes.count) bytes")
            if let value { #expect(value == expected) }
        }
        // Every split into two pieces.
        for split in 0...bytes.count {
            var parser = RESPParser()
            parser.append(bytes[..<split])
            let early = try parser.next()
            parser.append(bytes[split...])
            let value = try early ?? parser.next()
            #expect(value == expected, "split at \(split)")
            #expect(try parser.next() == nil)
        }
    }

    @Test("pipelined replies arriving in random pieces come out whole and in order")
    func pipelined() throws {
        var generator = SeededGenerator(seed: 7)
        let values = (0..<300).map { _ in RESPValue.random(using: &generator, depth: 0) }
        let wire = values.flatMap(\.wire)
        for _ in 0..<20 {
            var parser = RESPParser()
            var parsed: [RESPValue] = []
            var offset = 0
            while offset < wire.count {
                let piece = Int.random(in: 1...64, using: &generator)
                parser.append(wire[offset..<min(offset + piece, wire.count)])
                offset += piece
                while let value = try parser.next() { parsed.append(value) }
            }
            #expect(parsed == values)
            #expect(parser.bufferedByteCount == 0)
        }
    }

    @Test("a 4 MiB bulk string arriving in 1,000-byte reads is read once, whole")
    func largeBulk() throws {
        let body = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let wire = Array("$\(body.count)\r\n".utf8) + body + [13, 10] + Array("+OK\r\n".utf8)
        var parser = RESPParser()
        var values: [RESPValue] = []
        var offset = 0
        while offset < wire.count {
            parser.append(wire[offset..<min(offset + 1000, wire.count)])
            offset += 1000
            while let value = try parser.next() { values.append(value) }
        }
        #expect(values == [.bulkString(body), .simpleString("OK")])
    }

    @Test("bytes that cannot be a reply are a clear error, before any allocation the wire asks for", arguments: [
        ("!oops⏎", "unknown reply type"),
        ("+OK␊", "bare LF"),
        ("+O␍K⏎", "CR not followed by LF"),
        ("$3⏎abcde⏎", "not followed by CRLF"),
        ("$-2⏎", "negative bulk length"),
        ("*-5⏎", "negative array count"),
        ("$999999999999⏎", "over the limit"),
        ("*99999999⏎", "over the limit"),
        (":12a⏎", "invalid integer"),
        (":⏎", "invalid integer"),
        (":-⏎", "invalid integer"),
        (":99999999999999999999⏎", "invalid integer"),
        (":9999999999999999999⏎", "out of range"),
        ("$ 3⏎abc⏎", "invalid integer"),
        ("*1⏎*1⏎*1⏎*1⏎*1⏎*1⏎*1⏎*1⏎*1⏎:1⏎", "nested deeper"),
    ])
    func errors(text: String, message: String) {
        do {
            let values = try Self.parseAll(text)
            Issue.record("parsed \(values) from \(text.debugDescription)")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }

    @Test("a line or a reply past its limit is an error, not an endless buffer")
    func boundedBuffering() throws {
        var limits = RESPParser.Limits()
        limits.maxLineLength = 100
        var parser = RESPParser(limits: limits)
        parser.append(Array(repeating: UInt8(ascii: "a"), count: 1) + Array(repeating: UInt8(ascii: "x"), count: 500))
        #expect(throws: RESPParser.ProtocolError.self) { try parser.next() }

        limits = RESPParser.Limits()
        limits.maxReplyBytes = 1000
        parser = RESPParser(limits: limits)
        parser.append(Array("*100\r\n".utf8))
        var error: RESPParser.ProtocolError?
        for _ in 0..<100 where error == nil {
            parser.append(Array("$20\r\n01234567890123456789\r\n".utf8))
            do { _ = try parser.next() } catch let caught { error = caught }
        }
        #expect(error?.isOverLimit == true && error?.description.contains("longer than 1000") == true)
    }

    @Test("after an error the parser stays failed, so its connection is never read again")
    func stickyError() {
        var parser = RESPParser()
        parser.append(Array("?\r\n+OK\r\n".utf8))
        #expect(throws: RESPParser.ProtocolError.self) { try parser.next() }
        #expect(throws: RESPParser.ProtocolError.self) { try parser.next() }
    }

    /// How the fuzzed inputs ended: in replies, in an error, or waiting for more bytes.
    struct FuzzOutcomes: CustomStringConvertible {
        var values = 0, errors = 0, pending = 0
        var description: String { "\(values) replies, \(errors) errors, \(pending) pending" }
    }

    static let fuzzLimits: RESPParser.Limits = {
        var limits = RESPParser.Limits()
        limits.maxBulkLength = 4096
        limits.maxArrayCount = 64
        limits.maxDepth = 4
        limits.maxLineLength = 256
        limits.maxReplyBytes = 16 << 10
        return limits
    }()

    static let fuzzAlphabet = Array("+-:$*\r\n0123456789-abcOK".utf8)

    @Test("seeded fuzzing: random and mutated bytes in random pieces never crash or hang, and fail with a message",
          arguments: FuzzCases.seeds([0x5EED_2024]))
    func fuzz(seed: UInt64) throws {
        var outcomes = FuzzOutcomes()
        let ran = try FuzzCases(seed: seed, minimum: 1_500, maximum: 3_000, budget: .milliseconds(500)).run { fuzzCase in
            var generator = SeededGenerator(seed: fuzzCase.seed)
            let input = Self.fuzzInput(kind: fuzzCase.index % 3, using: &generator)
            try Self.parseInPieces(input, using: &generator, label: fuzzCase.label, outcomes: &outcomes)
        }
        // The generator reaches every outcome, so the fuzzing is not all one kind.
        #expect(outcomes.values > ran / 6 && outcomes.errors > ran / 6 && outcomes.pending > ran / 60,
                "seed \(hexSeed(seed)), \(ran) cases: \(outcomes)")
    }

    /// Random bytes (kind 0), random bytes from the protocol's own characters (1), or valid
    /// replies with one to four bytes changed, inserted or removed, or cut short (2).
    static func fuzzInput(kind: Int, using generator: inout SeededGenerator) -> [UInt8] {
        switch kind {
        case 0: return (0..<Int.random(in: 0...200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        case 1: return (0..<Int.random(in: 0...200, using: &generator)).map { _ in fuzzAlphabet.randomElement(using: &generator)! }
        default: break
        }
        var input = (0..<Int.random(in: 1...5, using: &generator)).flatMap { _ in RESPValue.random(using: &generator, depth: 0).wire }
        for _ in 0..<Int.random(in: 1...4, using: &generator) where !input.isEmpty {
            let at = Int.random(in: 0..<input.count, using: &generator)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: input[at] = UInt8.random(in: 0...255, using: &generator)
            case 1: input.insert(fuzzAlphabet.randomElement(using: &generator)!, at: at)
            case 2: input.remove(at: at)
            default: input = Array(input[..<at])
            }
        }
        return input
    }

    /// Feeds `input` to a parser in random pieces of 1 to 32 bytes, taking every reply after
    /// each, until the end or an error (which must say something).
    static func parseInPieces(_ input: [UInt8], using generator: inout SeededGenerator, label: String,
                              outcomes: inout FuzzOutcomes) throws {
        var parser = RESPParser(limits: fuzzLimits)
        var offset = 0, steps = 0
        while offset < input.count {
            let piece = Int.random(in: 1...32, using: &generator)
            parser.append(input[offset..<min(offset + piece, input.count)])
            offset += piece
            do {
                while try parser.next() != nil {
                    outcomes.values += 1
                    steps += 1
                    // Each reply takes at least 3 bytes: more steps than that is a loop.
                    try #require(steps <= input.count / 3 + 1, "\(label): more replies than the bytes allow")
                }
            } catch let error as RESPParser.ProtocolError {
                #expect(!error.description.isEmpty, "\(label)")
                outcomes.errors += 1
                return
            }
        }
        if parser.bufferedByteCount > 0 { outcomes.pending += 1 }
    }

    @Test("commands go out as arrays of bulk strings, binary-safe")
    func encoding() {
        var out: [UInt8] = []
        RedisCommand("SET", "k", [UInt8]([0, 13, 10]), "PX", 1500).encode(into: &out)
        #expect(out == Array("*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n".utf8) + [0, 13, 10] + Array("\r\n$2\r\nPX\r\n$4\r\n1500\r\n".utf8))
    }
}

extension RESPValue {
    /// The value's wire form, as a server sends it.
    var wire: [UInt8] {
        switch self {
        case .simpleString(let text): Array("+\(text)\r\n".utf8)
        case .error(let text): Array("-\(text)\r\n".utf8)
        case .integer(let value): Array(":\(value)\r\n".utf8)
        case .bulkString(nil): Array("$-1\r\n".utf8)
        case .bulkString(let bytes?): Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10]
        case .array(nil): Array("*-1\r\n".utf8)
        case .array(let values?): Array("*\(values.count)\r\n".utf8) + values.flatMap(\.wire)
        }
    }

    /// A random value, arrays at most three deep.
    static func random<G: RandomNumberGenerator>(using generator: inout G, depth: Int) -> RESPValue {
        let word = { (g: inout G) in String((0..<Int.random(in: 0...8, using: &g)).map { _ in "abcXYZ 019".randomElement(using: &g)! }) }
        switch Int.random(in: 0..<(depth < 3 ? 7 : 5), using: &generator) {
        case 0: return .simpleString(word(&generator))
        case 1: return .error("ERR " + word(&generator))
        case 2: return .integer(Int64.random(in: -1_000_000...1_000_000, using: &generator))
        case 3: return .bulkString((0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        case 4: return .bulkString(nil)
        case 5: return .array(nil)
        default: return .array((0..<Int.random(in: 0...4, using: &generator)).map { _ in random(using: &generator, depth: depth + 1) })
        }
    }
}
