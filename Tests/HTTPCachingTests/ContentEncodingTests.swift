import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// An answer the origin compressed (`Content-Encoding: gzip`) reaches the caller as without
/// the cache: libcurl decodes it, and the fields stay as the origin sent them.
@Suite("Content-Encoding through the cache")
struct ContentEncodingTests {
    /// `"compressed body "` 64 times, gzip-compressed (45 bytes). Made at each use: a `Data`
    /// kept in a static is reported by LeakSanitizer as a leak.
    static var gzipped: Data { Data(base64Encoded: "H4sIAAAAAAACA0vOzy0oSi0uTk1RSMpPqVRIHuWP8kf5I4YPADZAxeIABAAA")! }
    static var decoded: Data { Data(String(repeating: "compressed body ", count: 64).utf8) }

    @Test("a gzip answer: the decoded body, the same Content-Encoding, Content-Length and expected length, on a miss and on a hit",
          arguments: [false, true])
    func gzipAnswer(delegate: Bool) async throws {
        let h = try Harness()
        h.origin.route("/z", response: .init(headers: [("Content-Encoding", "gzip"), ("Cache-Control", "max-age=600"),
                                                       ("Content-Type", "text/plain")], body: Self.gzipped))
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let probe = ProbeDelegate()
            let session = h.session(caching: caching, delegate ? probe : nil)
            defer { session.finishTasksAndInvalidate() }
            var rounds: [String] = []
            for _ in 0..<2 {
                let (data, response) = try await answer(URLRequest(url: h.origin.url("/z")), on: session, probe: delegate ? probe : nil)
                rounds += ["\(data == Self.decoded)", "\(data.count)", response.value(forHTTPHeaderField: "Content-Encoding") ?? "-",
                           response.value(forHTTPHeaderField: "Content-Length") ?? "-", "\(response.expectedContentLength)"]
            }
            seen[caching] = rounds
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false]?.prefix(5) == ["true", "\(Self.decoded.count)", "gzip", "\(Self.gzipped.count)", "\(Self.gzipped.count)"])
        #expect(h.origin.requestCount("/z") == 3, "two without the cache, one with it (the second a hit)")
    }

    @Test("HEAD and ranges after a stored gzip answer: as without the cache (the coded length, ranges of the coded bytes from the origin), never from the decoded bytes")
    func headAndRangesOfACodedEntry() async throws {
        let h = try Harness()
        h.origin.routeRanged("/g", representation: Self.gzipped, etag: "\"g\"",
                             fields: [("Cache-Control", "max-age=600"), ("Content-Encoding", "gzip")])
        let steps: [(method: String, range: String?)] = [("GET", nil), ("HEAD", nil), ("GET", "bytes=0-9"), ("GET", "bytes=40-"),
                                                         ("GET", "bytes=50-"), ("HEAD", nil), ("GET", nil)]
        let seen = try await h.sideBySide { session in
            var seen: [String] = []
            for step in steps {
                var request = URLRequest(url: h.origin.url("/g"))
                request.httpMethod = step.method
                if let range = step.range { request.setValue(range, forHTTPHeaderField: "Range") }
                switch try #require(await fetchOutcome(session, request)) {
                case .failure(let error): seen.append("error \((error as NSError).code)")
                case .success(let result):
                    let fields = ["Content-Length", "Content-Range", "Content-Encoding"].map { result.response.value(forHTTPHeaderField: $0) ?? "-" }
                    seen.append("\(result.response.statusCode) \(fields) \(result.response.expectedContentLength) \(result.data.count)")
                }
            }
            return seen
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        #expect(seen[false]?[1] == "200 [\"\(Self.gzipped.count)\", \"-\", \"gzip\"] \(Self.gzipped.count) 0", "HEAD: the coded length")
        #expect(h.origin.requestCount("/g") == 7 + 4, "with the cache, only the last GET and the HEADs are answered from the store")
    }

    private func answer(_ request: URLRequest, on session: URLSession, probe: ProbeDelegate?) async throws -> (Data, HTTPURLResponse) {
        guard let probe else {
            let result = try await fetch(session, request)
            return (result.data, result.response)
        }
        probe.state.update { $0 = ProbeDelegate.State() }
        session.dataTask(with: request).resume()
        let done = try #require(await probe.finished())
        return (done.data, try #require(done.response))
    }
}
