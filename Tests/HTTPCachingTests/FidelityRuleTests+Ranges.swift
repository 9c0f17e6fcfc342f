import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension FidelityRuleTests {
    // MARK: - RFC 9110 section 14, RFC 9111 section 3.4: ranges from a stored complete response

    struct RangeRow: Sendable, CustomTestStringConvertible {
        let field: String
        let length: Int
        let expected: ByteRange
        var testDescription: String { "\(field) of \(length) bytes" }
    }

    static let rangeRows: [RangeRow] = [
        RangeRow(field: "bytes=0-1", length: 11, expected: .satisfiable(0...1)),
        RangeRow(field: "bytes=3-3", length: 11, expected: .satisfiable(3...3)),
        RangeRow(field: "bytes=1-", length: 11, expected: .satisfiable(1...10)),
        RangeRow(field: "bytes=-1", length: 11, expected: .satisfiable(10...10)),
        RangeRow(field: "bytes=-100", length: 11, expected: .satisfiable(0...10)),
        RangeRow(field: "bytes=5-100", length: 11, expected: .satisfiable(5...10)),
        RangeRow(field: "Bytes=0-0", length: 11, expected: .satisfiable(0...0)),
        RangeRow(field: " bytes=0-0 ", length: 11, expected: .satisfiable(0...0)),
        RangeRow(field: "bytes=11-", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=50-60", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=-0", length: 11, expected: .unsatisfiable),
        RangeRow(field: "bytes=0-0", length: 0, expected: .unsatisfiable),
        RangeRow(field: "bytes=-5", length: 0, expected: .whole),
        RangeRow(field: "bytes=-0", length: 0, expected: .unsatisfiable),
        RangeRow(field: "bytes=0-", length: 0, expected: .unsatisfiable),
        RangeRow(field: "bytes=0-1,3-4", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=3-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=-", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=a-b", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=+1-2", length: 11, expected: .unsupported),
        RangeRow(field: "items=0-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes 0-1", length: 11, expected: .unsupported),
        RangeRow(field: "bytes=99999999999999999999-", length: 11, expected: .unsupported),
        RangeRow(field: "", length: 11, expected: .unsupported),
    ]

    @Test("RFC 9110 §14.1.2: one bytes= range, first-last, open-ended or suffix; unsatisfiable ones; a suffix of an empty body is the whole; anything else unsupported",
          arguments: rangeRows)
    func byteRange(row: RangeRow) {
        #expect(ByteRange.resolve(row.field, length: row.length) == row.expected)
    }

    struct RangeDecisionRow: Sendable, CustomTestStringConvertible {
        let name: String
        let field: String
        let status: Int
        let age: TimeInterval
        let twoTier: Bool
        let expected: String
        /// The entry is gzip-coded (its stored bytes decoded by the network layer).
        var coded = false
        var testDescription: String { name }
    }

    static let rangeDecisionRows: [RangeDecisionRow] = [
        RangeDecisionRow(name: "fresh 200: 206", field: "bytes=0-1", status: 200, age: 10, twoTier: false, expected: "fresh-range(0-1)"),
        RangeDecisionRow(name: "fresh: 416", field: "bytes=20-", status: 200, age: 10, twoTier: false, expected: "fresh-416"),
        RangeDecisionRow(name: "stale: passed through", field: "bytes=0-1", status: 200, age: 200, twoTier: false, expected: "bypass"),
        RangeDecisionRow(name: "two-tier fresh: 206", field: "bytes=-2", status: 200, age: 10, twoTier: true, expected: "fresh-range(9-10)"),
        RangeDecisionRow(name: "two-tier stale window: passed through, not served stale", field: "bytes=0-1", status: 200, age: 100,
                         twoTier: true, expected: "bypass"),
        RangeDecisionRow(name: "a stored 404 is not a complete representation", field: "bytes=0-1", status: 404, age: 10,
                         twoTier: false, expected: "bypass"),
        RangeDecisionRow(name: "several ranges: passed through", field: "bytes=0-1,4-5", status: 200, age: 10, twoTier: false,
                         expected: "bypass"),
        RangeDecisionRow(name: "content-coded: passed through (ranges are of the coded bytes)", field: "bytes=0-1", status: 200,
                         age: 10, twoTier: false, expected: "bypass", coded: true),
        RangeDecisionRow(name: "content-coded, past the decoded end: passed through", field: "bytes=20-", status: 200, age: 10,
                         twoTier: false, expected: "bypass", coded: true),
    ]

    @Test("RFC 9111 §3.4 and RFC 9110 §14.2: a fresh complete entry answers one range (206 or 416); anything else leaves the network untouched",
          arguments: rangeDecisionRows)
    func rangeDecision(row: RangeDecisionRow) {
        let fields = ["Cache-Control": "max-age=100"].merging(row.coded ? ["Content-Encoding": "gzip"] : [:]) { $1 }
        let entry = Self.entry(row.status, fields, body: "0123456789A")
        let action = Self.decide(CacheDecisionTests.request(headers: ["Range": row.field]), entry: entry, age: row.age,
                                 row.twoTier ? Self.twoTier : Self.http)
        #expect(outcome(action) == row.expected)
        if case .forward(let plan) = action {
            #expect(plan.passThrough && !plan.store && !plan.replacesEntry && !plan.discardEntry && !plan.validate,
                    "what comes back reaches the caller untouched; the entry is neither replaced nor removed")
        }
    }

    @Test("RFC 9110 §14.4 and §15.3.7: a 206 from the store carries Content-Range, its length and the stored fields; a 416 says the length")
    func rangeHeads() {
        let entry = Self.entry(200, ["Cache-Control": "max-age=100", "ETag": "\"e\"", "Content-Type": "text/plain", "Content-Length": "11"],
                               body: "0123456789A")
        let disposition = Disposition(status: .fresh, hit: true, ttl: 90, age: 10)
        let partial = Answers.fromEntry(entry, form: .range(2...4), disposition: disposition, cacheName: "HTTPCaching")
        #expect(partial.head.statusCode == 206)
        #expect(partial.head.header("Content-Range") == "bytes 2-4/11")
        #expect(partial.head.header("Content-Length") == "3")
        #expect(partial.head.header("ETag") == "\"e\"" && partial.head.header("Content-Type") == "text/plain")
        #expect(partial.head.header("Age") == "10")
        #expect(partial.body == 2..<5)
        let unsatisfiable = Answers.fromEntry(entry, form: .rangeNotSatisfiable, disposition: disposition, cacheName: "HTTPCaching")
        #expect(unsatisfiable.head.statusCode == 416)
        #expect(unsatisfiable.head.header("Content-Range") == "bytes */11")
        #expect(unsatisfiable.head.header("Content-Length") == "0" && unsatisfiable.body.isEmpty)
        // HEAD: the body's length, unless the body is coded (its stored bytes are decoded): then the stored field.
        #expect(Answers.fromEntry(entry, form: .headersOnly, disposition: disposition, cacheName: "c").head.header("Content-Length") == "11")
        var coded = entry
        coded.headers["Content-Encoding"] = "gzip"
        coded.headers["Content-Length"] = "7"
        #expect(Answers.fromEntry(coded, form: .headersOnly, disposition: disposition, cacheName: "c").head.header("Content-Length") == "7")
        let head = Answers.fromEntry(entry, form: .headersOnly, disposition: disposition, cacheName: "HTTPCaching")
        #expect(head.head.statusCode == 200 && head.head.header("Content-Length") == "11" && head.body.isEmpty)
    }
}
