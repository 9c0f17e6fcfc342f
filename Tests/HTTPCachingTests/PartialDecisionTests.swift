import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// The decision with partial entries and `storesPartialContent`, and the answers a partial
/// entry gives.
@Suite("Partial content: the decision")
struct PartialDecisionTests {
    static let url = CacheDecisionTests.url
    static let storedAt = CacheDecisionTests.storedAt
    static var alphabet: Data { Data("abcdefghijklmnopqrstuvwxyz".utf8) }
    static let on = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .httpSemantics, storesPartialContent: true)
    static let off = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .httpSemantics)

    /// Bytes 0-4 and 10-14 of the alphabet, fresh for 100 s.
    static func partial(spans: [Range<Int>] = [0..<5, 10..<15], headers: [String: String] = ["ETag": "\"p\"", "Cache-Control": "max-age=100"],
                        status: Int = 206, body: Data? = nil) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: status, headers: headers,
                   body: body ?? spans.reduce(into: Data()) { $0.append(alphabet[$1]) }, storedAt: storedAt,
                   partialContent: PartialContent(completeLength: 26, spans: spans))
    }

    static func whole(headers: [String: String] = ["ETag": "\"p\"", "Cache-Control": "max-age=100"]) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: headers, body: alphabet, storedAt: storedAt)
    }

    /// What the decision does, in a word or two: `fresh-range(0-4)`, `part(miss, partial)`,
    /// `part+validate(expired, stale)`, `fetch(miss, partial)`, `bypass`, ...; `+discard` when
    /// the entry is removed first.
    static func describe(_ action: CacheAction) -> String {
        guard case .forward(let plan) = action else { return outcome(action) }
        var text: String
        if plan.storesPart {
            text = "part" + (plan.validate ? "+validate" : "") + "(\(plan.status.rawValue), \(plan.reason.rawValue))"
        } else if plan.passThrough {
            text = "bypass"
        } else {
            text = "fetch(\(plan.status.rawValue), \(plan.reason.rawValue)\(plan.store ? "" : ", nostore")\(plan.replacesEntry ? ", replaces" : ""))"
        }
        if plan.completesPart { text += "+complete" }
        if plan.fallback { text += "+fallback" }
        if plan.discardEntry { text += "+discard" }
        return text
    }

    static func decide(_ headers: [String: String] = [:], method: String = "GET", entry: CacheEntry?, age: TimeInterval = 10,
                       _ configuration: CacheConfiguration = on) -> String {
        describe(CacheDecision.decide(request: CacheDecisionTests.request(method, headers: headers), entry: entry,
                                      now: storedAt.addingTimeInterval(age), configuration: configuration))
    }

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let range: String?
        var method = "GET"
        var age: TimeInterval = 10
        var on = true
        let expected: String
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "fresh, a range the first span holds", range: "bytes=0-4", expected: "fresh-range(0-4)"),
        Row(name: "fresh, a range inside the second span", range: "bytes=11-13", expected: "fresh-range(11-13)"),
        Row(name: "fresh, an open range the spans do not hold", range: "bytes=12-", expected: "part(miss, partial)"),
        Row(name: "fresh, a range across a gap", range: "bytes=3-11", expected: "part(miss, partial)"),
        Row(name: "fresh, a suffix range in no span", range: "bytes=-3", expected: "part(miss, partial)"),
        Row(name: "fresh, a range past the complete length: 416 from the entry", range: "bytes=30-", expected: "fresh-416"),
        Row(name: "fresh, several ranges: passed through", range: "bytes=0-1,11-12", expected: "bypass"),
        Row(name: "fresh, another unit: passed through", range: "items=0-1", expected: "bypass"),
        Row(name: "fresh, the whole: the missing bytes asked for, completing the part", range: nil,
            expected: "fetch(miss, partial, replaces)+complete"),
        Row(name: "stale, the whole: completed the same way (If-Range keeps it one representation)", range: nil, age: 200,
            expected: "fetch(miss, partial, replaces)+complete"),
        Row(name: "off: the whole fetched, replacing the part", range: nil, on: false, expected: "fetch(miss, partial, replaces)"),
        Row(name: "fresh, a HEAD: passed through", range: nil, method: "HEAD", expected: "bypass"),
        Row(name: "stale, a range it holds: revalidated", range: "bytes=0-4", age: 200, expected: "part+validate(expired, stale)"),
        Row(name: "stale, a range it does not hold", range: "bytes=5-9", age: 200, expected: "part(miss, partial)"),
        Row(name: "off: a fresh partial entry still answers a range it holds", range: "bytes=0-4", on: false, expected: "fresh-range(0-4)"),
        Row(name: "off: a range it does not hold passes through", range: "bytes=5-9", on: false, expected: "bypass"),
        Row(name: "off: stale, a range it holds passes through", range: "bytes=0-4", age: 200, on: false, expected: "bypass"),
    ]

    @Test("the bytes a partial entry lacks: Range from its first gap to the end of its last, If-Range its strong validator; none without one")
    func completionFields() {
        let now = Self.storedAt
        #expect(PartialEntries.completionFields(for: Self.partial(), now: now) == ["Range": "bytes=5-", "If-Range": "\"p\""])
        #expect(PartialEntries.completionFields(for: Self.partial(spans: [5..<10, 20..<26]), now: now)
                == ["Range": "bytes=0-19", "If-Range": "\"p\""])
        #expect(PartialEntries.completionFields(for: Self.partial(headers: ["ETag": "W/\"p\""]), now: now) == nil, "a weak tag")
        #expect(PartialEntries.completionFields(for: Self.whole(), now: now) == nil)
        let weak = Self.decide([:], entry: Self.partial(headers: ["ETag": "W/\"p\"", "Cache-Control": "max-age=100"]))
        #expect(weak == "fetch(miss, partial, replaces)", "no strong validator: the whole is fetched")
        #expect(Self.decide(["Cache-Control": "only-if-cached"], entry: Self.partial()) == "unsatisfiable", "only-if-cached never reaches the origin")
    }

    @Test("RFC 9111 §3.3 and §3.4: a partial entry answers a single range it holds while fresh; anything else goes out, a part to combine",
          arguments: rows)
    func partialEntry(row: Row) {
        let headers = row.range.map { ["Range": $0] } ?? [:]
        #expect(Self.decide(headers, method: row.method, entry: Self.partial(), age: row.age, row.on ? Self.on : Self.off) == row.expected)
    }

    @Test("with storesPartialContent, a single range is forwarded to be stored as a part: with nothing stored, a stale whole entry (revalidated), a reload; the caller's own conditional range, several ranges, no-store pass through as before")
    func forwardsAPart() {
        #expect(Self.decide(["Range": "bytes=0-4"], entry: nil) == "part(miss, uri-miss)")
        #expect(Self.decide(["Range": "bytes=0-4"], entry: nil, Self.off) == "bypass", "off: as today")
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.whole()) == "fresh-range(0-4)", "a fresh whole entry answers as before")
        // A whole entry stays a fallback for a range, as it was before.
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.whole(), age: 200) == "part+validate(expired, stale)+fallback")
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.whole(), age: 200, Self.off) == "bypass+fallback")
        #expect(Self.decide(["Range": "bytes=0-4", "Cache-Control": "no-cache"], entry: Self.whole())
                == "part+validate(expired, request)+fallback")
        #expect(Self.decide(["Range": "bytes=0-4", "If-Range": "\"p\""], entry: Self.whole(), age: 200) == "bypass")
        #expect(Self.decide(["Range": "bytes=0-4", "If-None-Match": "\"p\""], entry: nil) == "bypass")
        #expect(Self.decide(["Range": "bytes=0-4,6-7"], entry: nil) == "bypass")
        #expect(Self.decide(["Range": "bytes=0-4", "Cache-Control": "no-store"], entry: nil) == "bypass")
        var reload = CacheDecisionTests.request(headers: ["Range": "bytes=0-4"])
        reload.cachePolicy = .reloadIgnoringLocalCacheData
        #expect(Self.describe(CacheDecision.decide(request: reload, entry: Self.partial(), now: Self.storedAt, configuration: Self.on))
                == "part(expired, request)")
        #expect(Self.decide(["Range": "bytes=3-11"], entry: Self.partial(headers: ["Cache-Control": "max-age=100"]), age: 200)
                == "part(miss, partial)", "no validator, not held: unconditional")
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.partial(headers: ["Cache-Control": "max-age=100"]), age: 200)
                == "part(expired, stale)", "no validator, held: unconditional")
    }

    @Test("a partial entry is never a fallback, never served stale in the background, never served whole")
    func neverWhole() {
        let configurations = [Self.on, Self.off, CacheConfiguration(storesPartialContent: true),
                              CacheConfiguration(policy: .cacheFirst, storesPartialContent: true)]
        for configuration in configurations {
            for range in [nil, "bytes=0-4", "bytes=0-20", "bytes=12-", "bytes=-3", "bytes=40-", "bytes=0-1,3-4"] {
                for age in [0.0, 30, 70, 200, 5000, 500_000] {
                    for method in ["GET", "HEAD"] {
                        let request = CacheDecisionTests.request(method, headers: range.map { ["Range": $0] } ?? [:])
                        let action = CacheDecision.decide(request: request, entry: Self.partial(), now: Self.storedAt.addingTimeInterval(age),
                                                          configuration: configuration)
                        switch action {
                        case .serve(let plan):
                            #expect(!plan.refresh, "\(range ?? "whole") at \(age)")
                            if case .range(let bytes) = plan.form {
                                #expect(Self.partial().partialContent!.covers(bytes), "\(range ?? "whole") at \(age)")
                            } else {
                                #expect(plan.form == .rangeNotSatisfiable, "\(method) \(range ?? "whole") at \(age): \(plan.form)")
                            }
                        case .forward(let plan):
                            #expect(!plan.fallback, "\(range ?? "whole") at \(age)")
                        case .fail:
                            break
                        }
                    }
                }
            }
        }
    }

    @Test("cache-first answers a range the parts hold at any age; cache-only fails for one they do not hold; only-if-cached too")
    func anyAge() {
        let cacheFirst = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .cacheFirst, storesPartialContent: true)
        let cacheOnly = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), policy: .cacheOnly, storesPartialContent: true)
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.partial(), age: 90_000, cacheFirst) == "stale-no-refresh-range(0-4)")
        #expect(Self.decide(["Range": "bytes=5-9"], entry: Self.partial(), age: 10, cacheFirst) == "part(miss, partial)")
        #expect(Self.decide(["Range": "bytes=5-9"], entry: Self.partial(), age: 10, cacheOnly) == "unsatisfiable")
        #expect(Self.decide(["Range": "bytes=0-4"], entry: Self.partial(), age: 90_000, cacheOnly) == "stale-no-refresh-range(0-4)")
        #expect(Self.decide(["Range": "bytes=0-4", "Cache-Control": "only-if-cached"], entry: Self.partial(), age: 200) == "unsatisfiable")
        #expect(Self.decide(["Range": "bytes=0-4", "Cache-Control": "only-if-cached"], entry: Self.partial(), age: 10) == "fresh-range(0-4)")
    }

    @Test("an inconsistent partial entry (206 without spans, spans on a 200, spans that are not the body's length) is removed: a miss")
    func inconsistent() {
        var spansOn200 = Self.partial()
        spansOn200.statusCode = 200
        let entries = [Self.partial(body: Data("abc".utf8)), spansOn200,
                       CacheEntry(key: CacheKey(url: Self.url), url: Self.url, statusCode: 206, headers: [:], body: Data("abc".utf8),
                                  storedAt: Self.storedAt)]
        for entry in entries {
            #expect(Self.decide(["Range": "bytes=0-1"], entry: entry) == "part(miss, miss)+discard")
            #expect(Self.decide([:], entry: entry) == "fetch(miss, miss)+discard")
            #expect(Self.decide([:], method: "HEAD", entry: entry) == "bypass+discard")
            #expect(Self.decide(["Range": "bytes=0-1"], entry: entry, Self.off) == "bypass+discard")
        }
    }

    @Test("RFC 9110 §14.4 and §15.3.7: a range from a partial entry is a 206 of the right bytes with the complete length; a 416 says that length")
    func answers() {
        let entry = Self.partial(headers: ["ETag": "\"p\"", "Content-Type": "text/plain"])
        let disposition = Disposition(status: .fresh, hit: true, ttl: 90, age: 10)
        for (bytes, text) in [(0...4, "abcde"), (1...3, "bcd"), (10...14, "klmno"), (12...12, "m")] as [(ClosedRange<Int>, String)] {
            let answer = Answers.fromEntry(entry, form: .range(bytes), disposition: disposition, cacheName: "HTTPCaching")
            #expect(answer.head.statusCode == 206)
            #expect(answer.head.header("Content-Range") == "bytes \(bytes.lowerBound)-\(bytes.upperBound)/26")
            #expect(answer.head.header("Content-Length") == String(bytes.count))
            #expect(entry.body[answer.body] == Data(text.utf8), "\(bytes)")
            #expect(answer.head.header("ETag") == "\"p\"" && answer.head.header("Content-Type") == "text/plain")
        }
        let unsatisfiable = Answers.fromEntry(entry, form: .rangeNotSatisfiable, disposition: disposition, cacheName: "HTTPCaching")
        #expect(unsatisfiable.head.statusCode == 416 && unsatisfiable.head.header("Content-Range") == "bytes */26")
        #expect(unsatisfiable.body.isEmpty)
    }
}
