import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// An interim 1xx answer (`103 Early Hints`, `100 Continue`) is not the response: Foundation
/// 6.3.1 reports it to a data delegate as if it were, then the final one. The cache takes the
/// final one: the caller gets it and its body, and it is what is stored and then served.
@Suite("Interim responses")
struct InterimResponseTests {
    /// `/hints`: a `103 Early Hints`, then a storable 200 on the same connection.
    private static func route(_ origin: LoopbackOrigin) {
        origin.route("/hints") { _, _ in
            var response = LoopbackOrigin.Response()
            response.raw = Data(("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello").utf8)
            return response
        }
    }

    @Test("a 103 before the answer: the caller gets the 200 and its body, which is stored, then served as a hit",
          arguments: [true, false])
    func earlyHints(delegate: Bool) async throws {
        let h = try Harness()
        Self.route(h.origin)
        let plain = try await fetch(uncachedSession(), h.origin.url("/hints"))
        #expect(plain.response.statusCode == 200 && plain.data == Data("hello".utf8), "without the cache")
        for round in 1...2 {
            let (status, body, cacheStatus) = try await get(h, delegate: delegate)
            #expect(status == 200, "round \(round)")
            #expect(body == Data("hello".utf8), "round \(round)")
            #expect(cacheStatus == (round == 1 ? .miss : .fresh), "round \(round)")
        }
        #expect(h.origin.requestCount("/hints") == 2, "one request without the cache, one with it")
        #expect(h.cache.entryCount == 1)
    }

    @Test("a 101 is the answer, as without the cache: a data delegate gets its status and the bytes after it")
    func switchingProtocols() async throws {
        let h = try Harness()
        h.origin.route("/switch") { _, _ in .raw("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\nhello") }
        var request = URLRequest(url: h.origin.url("/switch"))
        request.setValue("Upgrade", forHTTPHeaderField: "Connection")
        request.setValue("foo", forHTTPHeaderField: "Upgrade")
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let probe = ProbeDelegate()
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            session.dataTask(with: request).resume()
            let done = try #require(await probe.finished(), "the task ends (caching: \(caching))")
            seen[caching] = ["\(done.response?.statusCode ?? 0)", String(decoding: done.data, as: UTF8.self), "\(done.error == nil)"]
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false] == ["101", "hello", "true"])
    }

    /// `/hints` through the cache, on a data delegate's session or a completion handler's.
    private func get(_ h: Harness, delegate: Bool) async throws -> (Int?, Data, CacheStatus?) {
        guard delegate else {
            let result = try await h.get("/hints")
            return (result.response.statusCode, result.data, result.status)
        }
        let probe = ProbeDelegate()
        let session = h.delegateSession(probe)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: h.origin.url("/hints")).resume()
        let done = try #require(await probe.finished())
        #expect(done.error == nil)
        return (done.response?.statusCode, done.data, done.response?.cacheStatus)
    }
}
