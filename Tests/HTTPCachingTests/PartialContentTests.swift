import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// The pure parts of partial content: spans, `Content-Range`, strong comparison, combining.
@Suite("Partial content: spans, Content-Range, strong validators, combining")
struct PartialContentTests {
    // MARK: - Spans

    struct SpansRow: Sendable, CustomTestStringConvertible {
        let length: Int
        let spans: [Range<Int>]
        let valid: Bool
        var testDescription: String { "\(spans) of \(length)" }
    }

    static let spansRows: [SpansRow] = [
        SpansRow(length: 10, spans: [0..<5], valid: true),
        SpansRow(length: 10, spans: [2..<4, 6..<9], valid: true),
        SpansRow(length: 10, spans: [9..<10], valid: true),
        SpansRow(length: 10, spans: [0..<10], valid: false), // all of it: a whole entry
        SpansRow(length: 10, spans: [0..<5, 5..<10], valid: false), // touching: one span, and all of it
        SpansRow(length: 10, spans: [0..<3, 3..<5], valid: false), // touching spans are one span
        SpansRow(length: 10, spans: [4..<6, 0..<2], valid: false), // out of order
        SpansRow(length: 10, spans: [0..<4, 2..<6], valid: false), // overlapping
        SpansRow(length: 10, spans: [3..<3], valid: false), // empty
        SpansRow(length: 10, spans: [8..<11], valid: false), // past the length
        SpansRow(length: 10, spans: [], valid: false),
        SpansRow(length: 0, spans: [], valid: false),
        SpansRow(length: 1, spans: [0..<1], valid: false),
    ]

    @Test("a partial content's spans are sorted, non-empty, apart, within the length, and leave a byte out", arguments: spansRows)
    func spans(row: SpansRow) {
        let parts = PartialContent(completeLength: row.length, spans: row.spans)
        #expect((parts != nil) == row.valid)
        if let parts { #expect(parts.storedBytes == row.spans.reduce(0) { $0 + $1.count }) }
    }

    @Test("coverage: a range is held only when one span holds every byte of it; its place in the body skips the gaps")
    func coverage() throws {
        let parts = try #require(PartialContent(completeLength: 20, spans: [2..<5, 8..<12, 15..<16]))
        // body: bytes 2,3,4 | 8,9,10,11 | 15
        let rows: [(ClosedRange<Int>, Range<Int>?)] = [
            (2...4, 0..<3), (3...3, 1..<2), (8...11, 3..<7), (9...10, 4..<6), (15...15, 7..<8),
            (0...2, nil), (4...5, nil), (4...8, nil), (2...12, nil), (12...14, nil), (16...19, nil), (11...15, nil),
        ]
        for (bytes, expected) in rows {
            #expect(parts.bodyRange(of: bytes) == expected, "\(bytes)")
            #expect(parts.covers(bytes) == (expected != nil), "\(bytes)")
        }
        #expect(parts.gaps == [0..<2, 5..<8, 12..<15, 16..<20])
        let body = Data("abcdefgh".utf8)
        #expect(parts.segments(of: body).map { String(decoding: $0.bytes, as: UTF8.self) } == ["abc", "defg", "h"])
        #expect(parts.segments(of: body.suffix(from: 0)).map(\.span) == parts.spans)
    }

    @Test("union: spans merged when they overlap or touch, sorted; where they overlap the later segment's bytes win")
    func union() {
        func segment(_ span: Range<Int>, _ text: String) -> PartialContent.Segment {
            PartialContent.Segment(span: span, bytes: Data(text.utf8))
        }
        let rows: [([PartialContent.Segment], [Range<Int>], String)] = [
            ([segment(0..<3, "abc")], [0..<3], "abc"),
            ([segment(5..<7, "fg"), segment(0..<2, "ab")], [0..<2, 5..<7], "abfg"),
            ([segment(0..<3, "abc"), segment(3..<5, "de")], [0..<5], "abcde"),
            ([segment(0..<4, "abcd"), segment(2..<6, "XYef")], [0..<6], "abXYef"),
            ([segment(2..<6, "XYef"), segment(0..<4, "abcd")], [0..<6], "abcdef"),
            ([segment(1..<2, "b"), segment(0..<5, "ABCDE"), segment(7..<8, "h")], [0..<5, 7..<8], "ABCDEh"),
            ([segment(0..<2, "ab"), segment(4..<6, "ef"), segment(1..<5, "BCDE")], [0..<6], "aBCDEf"),
        ]
        for (segments, spans, body) in rows {
            let (merged, bytes) = PartialContent.union(segments)
            #expect(merged == spans && String(decoding: bytes, as: UTF8.self) == body, "\(segments.map(\.span))")
        }
        // Segments that are slices of a larger buffer (a start index other than 0).
        let buffer = Data("0123456789".utf8)
        let (merged, bytes) = PartialContent.union([PartialContent.Segment(span: 3..<6, bytes: buffer[3..<6]),
                                                    PartialContent.Segment(span: 5..<8, bytes: buffer[5..<8])])
        #expect(merged == [3..<8] && bytes == Data("34567".utf8))
    }

    // MARK: - Content-Range

    static let contentRangeRows: [(String, ContentRange?)] = [
        ("bytes 0-499/1234", ContentRange(first: 0, last: 499, completeLength: 1234)),
        ("bytes 500-1233/1234", ContentRange(first: 500, last: 1233, completeLength: 1234)),
        ("bytes 7-7/8", ContentRange(first: 7, last: 7, completeLength: 8)),
        ("Bytes 0-0/1", ContentRange(first: 0, last: 0, completeLength: 1)),
        ("BYTES 0-0/1", ContentRange(first: 0, last: 0, completeLength: 1)),
        (" bytes 1-2/3 ", ContentRange(first: 1, last: 2, completeLength: 3)),
        ("bytes 0-9/*", ContentRange(first: 0, last: 9, completeLength: nil)),
        ("bytes 0-999999999999999999/*", ContentRange(first: 0, last: 999_999_999_999_999_999, completeLength: nil)),
        ("bytes */1234", nil), // unsatisfied range: no content
        ("bytes 5-4/10", nil), // last before first
        ("bytes 0-9/9", nil), // complete length not above last
        ("bytes 0-9/0", nil),
        ("bytes 0-9", nil),
        ("bytes 0-/10", nil),
        ("bytes -9/10", nil),
        ("bytes  0-9/10", nil), // two spaces
        ("bytes=0-9/10", nil),
        ("items 0-9/10", nil),
        ("bytes 0-9/10, bytes 20-29/30", nil),
        ("bytes 0-9/1O", nil),
        ("bytes +0-9/10", nil),
        ("bytes 0x0-9/10", nil),
        ("bytes 0-1000000000000000000/*", nil), // 19 digits
        ("bytes 0-9/10000000000000000000", nil),
        ("bytes ٠-٩/١٠", nil), // non-ASCII digits
        ("bytes 0-9/10/11", nil),
        ("bytes 0-9-10/11", nil),
        ("bytes", nil),
        ("", nil),
    ]

    @Test("RFC 9110 §14.4: Content-Range parsed strictly; another unit, an unsatisfied range, a bad or invalid value is nil",
          arguments: contentRangeRows)
    func contentRange(field: String, expected: ContentRange?) {
        #expect(ContentRange(field) == expected)
        #expect(ContentRange(nil) == nil)
    }

    @Test("Content-Range fuzzed: mutations and noise never trap, and whatever parses is a valid range")
    func contentRangeFuzz() {
        for seed in [UInt64(0xC0_47E7), 20_260_419, 77] {
            var fuzzer = FieldFuzzer(seed: seed)
            for index in 0..<2_000 {
                let valid = "bytes \(fuzzer.int(0...50))-\(fuzzer.int(50...99))/\(fuzzer.int(0...1) == 0 ? "*" : String(fuzzer.int(100...200)))"
                let input = index % 3 == 0 ? fuzzer.string() : fuzzer.mutate(valid)
                guard let range = ContentRange(input) else { continue }
                #expect(range.first >= 0 && range.last >= range.first && range.count == range.last - range.first + 1,
                        "seed \(seed) case \(index): \(input.debugDescription)")
                if let length = range.completeLength { #expect(length > range.last, "seed \(seed) case \(index): \(input.debugDescription)") }
            }
            for _ in 0..<200 {
                let first = fuzzer.int(0...1_000_000), last = first + fuzzer.int(0...1_000_000), length = last + fuzzer.int(1...1_000)
                #expect(ContentRange("bytes \(first)-\(last)/\(length)") == ContentRange(first: first, last: last, completeLength: length))
            }
        }
    }

    // MARK: - Strong comparison

    static let date = "Tue, 10 Mar 2026 10:00:00 GMT"
    static let secondLater = "Tue, 10 Mar 2026 10:00:01 GMT"

    static let strongRows: [(String, [String: String], [String: String], Bool)] = [
        ("equal strong tags", ["ETag": "\"a\""], ["ETag": "\"a\""], true),
        ("equal strong tags, spaces around", ["ETag": " \"a\""], ["ETag": "\"a\" "], true),
        ("different strong tags", ["ETag": "\"a\""], ["ETag": "\"b\""], false),
        ("tags differing in case", ["ETag": "\"a\""], ["ETag": "\"A\""], false),
        ("a weak tag on one side", ["ETag": "W/\"a\""], ["ETag": "\"a\""], false),
        ("weak tags on both sides, equal", ["ETag": "W/\"a\""], ["ETag": "W/\"a\""], false),
        ("an unquoted tag", ["ETag": "a"], ["ETag": "a"], false),
        ("a tag with a quote inside", ["ETag": "\"a\"b\""], ["ETag": "\"a\"b\""], false),
        ("a tag on one side only", ["ETag": "\"a\""], [:], false),
        ("a tag on one side, a strong Last-Modified on both",
         ["ETag": "\"a\"", "Last-Modified": date, "Date": secondLater], ["Last-Modified": date, "Date": secondLater], false),
        ("no validator at all", [:], [:], false),
        ("the same Last-Modified, each Date a second later", ["Last-Modified": date, "Date": secondLater],
         ["Last-Modified": date, "Date": secondLater], true),
        ("the same Last-Modified, one Date the same second (weak)", ["Last-Modified": date, "Date": date],
         ["Last-Modified": date, "Date": secondLater], false),
        ("the same Last-Modified, no Date (weak)", ["Last-Modified": date], ["Last-Modified": date], false),
        ("different Last-Modified", ["Last-Modified": date, "Date": "Tue, 10 Mar 2026 11:00:00 GMT"],
         ["Last-Modified": secondLater, "Date": "Tue, 10 Mar 2026 11:00:00 GMT"], false),
        ("a Last-Modified that is not a date", ["Last-Modified": "yesterday", "Date": secondLater],
         ["Last-Modified": "yesterday", "Date": secondLater], false),
    ]

    @Test("RFC 9110 §8.8.3.2 and §8.8.2.2: parts combine only on a shared strong validator", arguments: strongRows)
    func strongComparison(name: String, a: [String: String], b: [String: String], expected: Bool) {
        let now = Date(timeIntervalSince1970: 1_773_000_000)
        let first = ResponseHead(statusCode: 206, headers: a, url: URL(string: "http://example.test/")!)
        let second = ResponseHead(statusCode: 206, headers: b, url: URL(string: "http://example.test/")!)
        #expect(Validation.shareStrongValidator(first.header, second.header, now: now) == expected, "\(name)")
        #expect(Validation.shareStrongValidator(second.header, first.header, now: now) == expected, "\(name), the other way round")
    }

    @Test("If-Range carries a strong ETag, else a strong Last-Modified, else nothing")
    func ifRange() {
        let now = Date(timeIntervalSince1970: 1_773_000_000)
        func value(_ headers: [String: String]) -> String? {
            Validation.ifRangeValue(ResponseHead(statusCode: 200, headers: headers, url: URL(string: "http://example.test/")!).header,
                                    now: now)
        }
        #expect(value(["ETag": "\"a\"", "Last-Modified": Self.date, "Date": Self.secondLater]) == "\"a\"")
        #expect(value(["ETag": "W/\"a\"", "Last-Modified": Self.date, "Date": Self.secondLater]) == nil)
        #expect(value(["Last-Modified": Self.date, "Date": Self.secondLater]) == Self.date)
        #expect(value(["Last-Modified": Self.date, "Date": Self.date]) == nil)
        #expect(value([:]) == nil)
    }
}
