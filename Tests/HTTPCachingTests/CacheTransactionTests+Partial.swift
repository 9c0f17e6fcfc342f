import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// The transaction's part steps, driven input by input: a 206 stored as a part, refused from
/// its head or its end, a completion, and a completion that falls back to the whole.
@Suite("The transaction: parts")
struct CacheTransactionPartTests {
    typealias T = CacheTransactionTests
    static let on = CacheConfiguration(windows: .test(fresh: 60, usable: 3600), storesPartialContent: true, maxPartialSpans: 2)

    static func ranged(_ range: String?) -> URLRequest {
        var request = URLRequest(url: T.url)
        if let range { request.setValue(range, forHTTPHeaderField: "Range") }
        return request
    }

    static func part(_ contentRange: String, etag: String = "\"v1\"") -> ResponseHead {
        T.head(206, ["Content-Range": contentRange, "ETag": etag, "Cache-Control": "max-age=100"])
    }

    /// Bytes 0-1 and 4-5 of `abcdefghij`.
    static func stored() -> CacheEntry {
        CacheEntry(key: CacheKey(url: T.url), url: T.url, statusCode: 206, headers: ["ETag": "\"v1\"", "Cache-Control": "max-age=100"],
                   body: Data("abef".utf8), storedAt: T.t0, partialContent: PartialContent(completeLength: 10, spans: [0..<2, 4..<6]))
    }

    @Test("a 206 to a range the parts lack: passed to the caller untouched, then stored combined with them")
    func storedCombined() throws {
        var t = T.transaction(Self.ranged("bytes=2-3"), configuration: Self.on)
        #expect(T.names(t.start(entry: Self.stored(), now: T.t0)) == ["forward"])
        #expect(T.names(t.head(Self.part("bytes 2-3/10"), now: T.t0)) == ["served(miss)", "respond(206, miss, stored)"])
        let actions = t.body(Data("cd".utf8)) + t.end(now: T.t0)
        #expect(T.names(actions) == ["store(abcdef)", "deliver(cd)", "finish"])
        guard case .store(let entry) = actions.first else { return }
        #expect(entry.partialContent?.spans == [0..<6] && entry.statusCode == 206 && entry.header("Content-Range") == nil)
    }

    @Test("refused parts: a third span over maxPartialSpans, or a Content-Length that is not the range's, at the head; content that is not what Content-Range gives at the end")
    func refused() {
        var t = T.transaction(Self.ranged("bytes=8-9"), configuration: Self.on)
        _ = t.start(entry: Self.stored(), now: T.t0)
        let head = t.head(Self.part("bytes 8-9/10"), now: T.t0)
        #expect(head.first == .emit(.notStored(.tooManySpans(limit: 2))))
        #expect(T.names(head).dropFirst() == ["served(bypass)", "respond(206, bypass)"])
        var short = T.transaction(Self.ranged("bytes=2-3"), configuration: Self.on)
        _ = short.start(entry: Self.stored(), now: T.t0)
        _ = short.head(Self.part("bytes 2-3/10"), now: T.t0)
        let actions = short.body(Data("c".utf8)) + short.end(now: T.t0)
        #expect(actions.first.flatMap { if case .emit(let kind) = $0 { kind.notStoredReason?.name } else { nil } } == "unusablePart")
        #expect(!T.names(actions).contains { $0.hasPrefix("store") }, "nothing stored; the stored parts stay")
        // A Content-Length that is not the range's: refused at the head, so Cache-Status never says `stored`.
        var announced = T.transaction(Self.ranged("bytes=4-9"), configuration: Self.on)
        _ = announced.start(entry: Self.stored(), now: T.t0)
        var head206 = Self.part("bytes 4-9/10")
        head206.headers["Content-Length"] = "5"
        let refusedHead = announced.head(head206, now: T.t0)
        #expect(refusedHead.first.flatMap { if case .emit(let kind) = $0 { kind.notStoredReason?.name } else { nil } } == "unusablePart")
        #expect(T.names(refusedHead).dropFirst() == ["served(bypass)", "respond(206, bypass)"])
    }

    @Test("the whole: the missing bytes asked for, the caller served the whole once they complete the parts; otherwise the whole asked for again")
    func completion() {
        var t = T.transaction(Self.ranged(nil), configuration: Self.on)
        #expect(T.names(t.start(entry: Self.stored(), now: T.t0)) == ["forward(conditional)"])
        #expect(T.names(t.head(Self.part("bytes 2-9/10"), now: T.t0)) == [], "nothing for the caller yet")
        let actions = t.body(Data("cdefghij".utf8)) + t.end(now: T.t0)
        #expect(T.names(actions) == ["store(abcdefghij)", "served(miss)", "serve(abcdefghij, miss)"])

        var other = T.transaction(Self.ranged(nil), configuration: Self.on)
        _ = other.start(entry: Self.stored(), now: T.t0)
        #expect(T.names(other.head(Self.part("bytes 2-9/10", etag: "\"v2\""), now: T.t0)) == ["cancelForward", "forward"],
                "another representation's bytes: the whole, as sent")
        #expect(T.names(other.head(T.head(200, ["ETag": "\"v2\"", "Cache-Control": "max-age=100"]), now: T.t0))
                == ["served(miss)", "respond(200, miss, stored)"])
    }
}
