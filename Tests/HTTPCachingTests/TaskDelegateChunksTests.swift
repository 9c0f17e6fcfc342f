import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
@testable import HTTPCaching

/// A data delegate given to `data(for:delegate:)` gets the body's bytes through
/// `didReceive(data)` besides the awaited result, as Foundation's own HTTP class hands them:
/// on a plain session and on a caching one, whether the answer comes from the network, from
/// the store, or from the store after a 304.
@Suite struct TaskDelegateChunksTests {
    /// What the given delegate and the awaited result saw: the status it was told, the bytes
    /// it got, whether they are the body, and the session delegate's bytes.
    private func observe(_ session: URLSession, _ url: URL, sessionProbe: ProbeDelegate?) async throws -> String {
        let given = ProbeDelegate()
        let (data, response) = try await session.data(for: URLRequest(url: url), delegate: given)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        // The delegate's calls are queued on the session's delegate queue and may still wait
        // there when `data(for:)` returns (with or without the cache): wait for the bytes.
        let whole = await given.wait { $0.byteCount >= data.count && $0.response != nil }
        let seen = given.value
        let sessionBytes = sessionProbe?.value.byteCount ?? 0
        return "\(status) given: response \(seen.response?.statusCode ?? 0) first \(seen.order.first == "response"), \(seen.byteCount) bytes, " +
            "same as awaited \(whole && seen.data == data), session delegate \(sessionBytes) bytes"
    }

    private func routes(_ origin: LoopbackOrigin) {
        let body = LoopbackOrigin.filler(count: 150_000)
        origin.route("/fresh", response: .init(headers: [("Cache-Control", "max-age=600")], body: body))
        origin.route("/validated", response: .init(headers: [("Cache-Control", "no-cache"), ("ETag", "\"v1\"")], body: body))
        origin.route("/private", response: .init(headers: [("Cache-Control", "no-store")], text: "not kept"))
    }

    @Test("data(for:delegate:): the given data delegate gets every byte, as without the cache (miss, hit, 304, not stored)",
          arguments: [false, true])
    func givenDelegateGetsBytes(sessionHasDelegate: Bool) async throws {
        let h = try Harness()
        routes(h.origin)
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let sessionProbe = sessionHasDelegate ? ProbeDelegate() : nil
            let session = h.session(caching: caching, sessionProbe)
            defer { session.finishTasksAndInvalidate() }
            for path in ["/fresh", "/fresh", "/validated", "/validated", "/private"] {
                seen[caching, default: []].append(try await observe(session, h.origin.url(path), sessionProbe: sessionProbe))
            }
        }
        #expect(seen[true] == seen[false])
        #expect(seen[false]?.allSatisfy { $0.contains("same as awaited true") && $0.hasSuffix("session delegate 0 bytes") } == true,
                "\(seen[false] ?? [])")
        #expect(h.origin.requestCount("/fresh") == 3, "the second caching request is a hit")
    }
}
