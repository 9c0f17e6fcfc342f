import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// `HTTPCache` with a Redis store behind a caching URLSession, against the loopback origin.
@Suite("Redis store end to end", .redisServer)
struct RedisEndToEndTests {
    @Test("a miss, then a fresh hit served from Redis; another host's cache on the same prefix hits too; with Redis killed the request still succeeds from the network")
    func throughTheCache() async throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let h = try Harness(store: store)
        h.origin.route("/item", response: .init(text: "from the origin"))

        let miss = try await h.get("/item")
        #expect(miss.status == .miss && miss.text == "from the origin")
        #expect(await h.recorder.wait(for: .stored))
        #expect(store.entryCount == 1, "the entry is in Redis")

        h.clock.advance(by: 10)
        let hit = try await h.get("/item")
        #expect(hit.status == .fresh && hit.text == "from the origin")
        #expect(hit.response.value(forHTTPHeaderField: "Age") == "10")
        #expect(h.origin.requestCount("/item") == 1, "fresh: no network")

        // A second host: its own cache, session and store object, the same Redis and prefix.
        let otherHost = try Harness(store: try server.makeStore(prefix: store.configuration.keyPrefix))
        let shared = try await fetch(otherHost.session, h.origin.url("/item"))
        #expect(shared.status == .fresh && shared.text == "from the origin", "served from the entry the first host stored")
        #expect(h.origin.requestCount("/item") == 1)

        server.kill()
        let start = Date()
        let down = try await h.get("/item")
        #expect(down.response.statusCode == 200 && down.text == "from the origin")
        #expect(h.origin.requestCount("/item") == 2, "from the network")
        #expect(Date().timeIntervalSince(start) < 5, "the dead store did not hold the request up")
        #expect(await h.recorder.wait { events in
            events.contains { $0.kind.name == "storeFailed" }
        }, "the failure is reported as storeFailed")
    }
}
