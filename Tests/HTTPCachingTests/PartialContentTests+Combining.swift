import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

extension PartialContentTests {
    static let url = URL(string: "http://example.test/media")!
    static let t0 = Date(timeIntervalSince1970: 1_773_000_000)
    /// The representation every part below is cut from: 26 bytes.
    static var alphabet: Data { Data("abcdefghijklmnopqrstuvwxyz".utf8) }

    static func partHead(_ range: Range<Int>, length: Int = 26, etag: String? = "\"v1\"", extra: [String: String] = [:]) -> ResponseHead {
        var headers = ["Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(length)",
                       "Content-Length": String(range.count), "Content-Type": "text/plain"]
        if let etag { headers["ETag"] = etag }
        headers.merge(extra) { $1 }
        return ResponseHead(statusCode: 206, headers: headers, url: url)
    }

    /// The part as the transaction makes it: the 206's head and content, stored now.
    static func part(_ head: ResponseHead, body: Data? = nil, at now: Date = t0) -> (CacheEntry, ContentRange) {
        let range = ContentRange(head.header("Content-Range"))!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 206,
                               headers: Storability.storedHeaders(of: head, keepingCookies: false),
                               body: body ?? alphabet[range.span], storedAt: now)
        return (entry, range)
    }

    static func combine(_ head: ResponseHead, onto previous: CacheEntry?, maxSpans: Int = 16, at now: Date = t0,
                        body: Data? = nil) -> PartialEntries.Combination {
        let (entry, range) = part(head, body: body, at: now)
        return PartialEntries.combine(part: entry, range: range, head: head, previous: previous, keepingCookies: false,
                                      maxSpans: maxSpans, now: now)
    }

    static func stored(_ combination: PartialEntries.Combination) -> CacheEntry? {
        if case .entry(let entry, _) = combination { return entry }
        return nil
    }

    @Test("RFC 9111 §3.4: a part alone is a 206 entry without the part's own Content-Range and Content-Length")
    func partAlone() throws {
        let entry = try #require(Self.stored(Self.combine(Self.partHead(0..<5), onto: nil)))
        #expect(entry.statusCode == 206 && entry.body == Data("abcde".utf8))
        #expect(entry.partialContent == PartialContent(completeLength: 26, spans: [0..<5]))
        #expect(entry.header("Content-Range") == nil && entry.header("Content-Length") == nil)
        #expect(entry.header("ETag") == "\"v1\"" && entry.header("Content-Type") == "text/plain")
        #expect(entry.isConsistentPartial)
    }

    @Test("RFC 9111 §3.4: parts sharing a strong validator combine; the new part's fields replace the stored ones, its age starts again")
    func combines() throws {
        let first = try #require(Self.stored(Self.combine(Self.partHead(0..<5, extra: ["X-Version": "1"]), onto: nil)))
        let later = Self.t0.addingTimeInterval(100)
        let combination = Self.combine(Self.partHead(10..<15, extra: ["X-Version": "2"]), onto: first, at: later)
        guard case .entry(let entry, let combined) = combination else { Issue.record("not stored"); return }
        #expect(combined)
        #expect(entry.partialContent?.spans == [0..<5, 10..<15] && entry.body == Data("abcdeklmno".utf8))
        #expect(entry.header("X-Version") == "2" && entry.storedAt == later && entry.generation != first.generation)
        // Overlapping and touching parts merge into one span.
        let merged = try #require(Self.stored(Self.combine(Self.partHead(4..<11), onto: entry)))
        #expect(merged.partialContent?.spans == [0..<15] && merged.body == Self.alphabet[0..<15])
    }

    @Test("RFC 9110 §15.3.7.3: parts that hold every byte make a complete 200 with Content-Length the complete length")
    func completes() throws {
        let first = try #require(Self.stored(Self.combine(Self.partHead(0..<13), onto: nil)))
        let whole = try #require(Self.stored(Self.combine(Self.partHead(13..<26), onto: first)))
        #expect(whole.statusCode == 200 && whole.partialContent == nil && whole.body == Self.alphabet)
        #expect(whole.header("Content-Length") == "26" && whole.header("Content-Range") == nil)
        // A stored whole 200 with the same strong validator: the part only freshens it.
        let stored = CacheEntry(key: CacheKey(url: Self.url), url: Self.url, statusCode: 200,
                                headers: ["ETag": "\"v1\"", "Content-Length": "26", "X-Old": "1"], body: Self.alphabet, storedAt: Self.t0)
        let later = Self.t0.addingTimeInterval(50)
        let freshened = try #require(Self.stored(Self.combine(Self.partHead(3..<6), onto: stored, at: later)))
        #expect(freshened.statusCode == 200 && freshened.body == Self.alphabet && freshened.storedAt == later)
        #expect(freshened.header("X-Old") == "1" && freshened.header("Content-Type") == "text/plain")
    }

    @Test("parts never combine without a shared strong validator or with another complete length: the new part stands alone",
          arguments: [
            ("another ETag", "\"v2\"", 26), ("a weak ETag", "W/\"v1\"", 26), ("no ETag", nil, 26), ("another length", "\"v1\"", 27),
          ] as [(String, String?, Int)])
    func replaces(name: String, etag: String?, length: Int) throws {
        let first = try #require(Self.stored(Self.combine(Self.partHead(0..<5), onto: nil)))
        let head = Self.partHead(10..<15, length: length, etag: etag)
        let entry = try #require(Self.stored(Self.combine(head, onto: first)))
        #expect(entry.partialContent?.spans == [10..<15] && entry.body == Self.alphabet[10..<15], "\(name)")
        #expect(entry.partialContent?.completeLength == length, "\(name)")
        // A stored weak-tagged part never combines either, even with the same weak tag.
        let weak = try #require(Self.stored(Self.combine(Self.partHead(0..<5, etag: "W/\"w\""), onto: nil)))
        let next = try #require(Self.stored(Self.combine(Self.partHead(5..<9, etag: "W/\"w\""), onto: weak)))
        #expect(next.partialContent?.spans == [5..<9])
    }

    @Test("the span bound: a part that would leave more spans than maxPartialSpans is refused; one that joins spans is not")
    func spanBound() throws {
        var entry = try #require(Self.stored(Self.combine(Self.partHead(0..<1), onto: nil, maxSpans: 3)))
        entry = try #require(Self.stored(Self.combine(Self.partHead(4..<5), onto: entry, maxSpans: 3)))
        entry = try #require(Self.stored(Self.combine(Self.partHead(8..<9), onto: entry, maxSpans: 3)))
        #expect(entry.partialContent?.spans.count == 3)
        #expect(Self.combine(Self.partHead(12..<13), onto: entry, maxSpans: 3) == .tooManySpans)
        let joined = try #require(Self.stored(Self.combine(Self.partHead(1..<4), onto: entry, maxSpans: 3)))
        #expect(joined.partialContent?.spans == [0..<5, 8..<9] && joined.body == Data("abcdei".utf8))
    }

    @Test("combining fuzzed: random parts of a representation, some of another version; every stored byte is the right one")
    func combiningFuzz() throws {
        let versions = [Self.alphabet, Data("ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)]
        for seed in [UInt64(1), 0xFACE, 20_260_419] {
            var random = SeededGenerator(seed: seed)
            var stored: CacheEntry?
            for step in 0..<300 {
                let version = Int.random(in: 0...9, using: &random) == 0 ? 1 : 0
                let start = Int.random(in: 0...25, using: &random), end = Int.random(in: (start + 1)...26, using: &random)
                let head = Self.partHead(start..<end, etag: version == 0 ? "\"v1\"" : "\"v2\"")
                let combination = Self.combine(head, onto: stored, maxSpans: 4, body: versions[version][start..<end])
                guard case .entry(let entry, _) = combination else { continue }
                let etag = entry.header("ETag")
                let representation = versions[etag == "\"v1\"" ? 0 : 1]
                if let parts = entry.partialContent {
                    #expect(entry.isConsistentPartial && parts.spans.count <= 4, "seed \(seed) step \(step)")
                    for segment in parts.segments(of: entry.body) {
                        #expect(segment.bytes == representation[segment.span], "seed \(seed) step \(step): \(segment.span)")
                    }
                } else {
                    #expect(entry.statusCode == 200 && entry.body == representation, "seed \(seed) step \(step)")
                    stored = nil // start over once whole
                    continue
                }
                stored = entry
            }
        }
    }
}
