import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

@Suite("One key derivation, partitions that cannot be reversed, stores off Foundation's queue")
struct KeysAndSharingTests {
    @Test("credentials in the session's own headers: the installation's management calls key exactly as its requests do")
    func sessionHeadersReachManagement() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer alice"]
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/me")
        let cache = HTTPCache(now: TestClock().closure)
        let installation = configuration.enableHTTPCaching(cache)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        _ = try await fetch(session, origin.url("/me"))
        let request = URLRequest(url: origin.url("/me"))
        #expect(installation.hasEntry(for: request), "the installation sees the session's Authorization")
        #expect(try installation.key(for: request).partition != nil)
        #expect(!cache.manage.hasEntry(for: request), "the cache alone has no session headers: another partition")
        try installation.removeEntry(for: request)
        #expect(cache.entryCount == 0, "removeEntry removes what the session stored")
        #expect(try await fetch(session, origin.url("/me")).status == .miss)
    }

    @Test("partitions are keyed hashes: the same credentials give different partitions under different store secrets, and never the plain SHA-256")
    func keyedPartitions() throws {
        var request = URLRequest(url: URL(string: "http://example.test/a")!)
        request.setValue("Basic YWxpY2U6cGFzc3dvcmQ=", forHTTPHeaderField: "Authorization")
        let first = try HTTPCache(store: MemoryResponseStore()).manage.key(for: request)
        let second = try HTTPCache(store: MemoryResponseStore()).manage.key(for: request)
        let again = try HTTPCache(store: MemoryResponseStore()).manage.key(for: request)
        #expect(first.partition != nil && first.partition != second.partition && second.partition != again.partition)
        let unkeyed = SHA256.hex(SHA256.hash(Array("authorization\u{0}Basic YWxpY2U6cGFzc3dvcmQ=\u{0}".utf8)))
        #expect(first.partition?.rawValue.count == 32 && !unkeyed.hasPrefix(first.partition!.rawValue))
        #expect(first.description.contains("[credentials]") && !first.description.contains("YWxp"), "a key never prints its partition")
        #expect(first.url == "http://example.test/a" && first.storageString.contains(first.partition!.rawValue))
    }

    @Test("a disk store's partition secret is created with it, 0600, and the same after reopening: partitions survive restarts")
    func diskSecret() throws {
        let directory = TemporaryDirectory()
        var request = URLRequest(url: URL(string: "http://example.test/a")!)
        request.setValue("sid=1", forHTTPHeaderField: "Cookie")
        let first: CacheKey
        do {
            let store = try DiskResponseStore(directory: directory.url)
            first = try HTTPCache(store: store).manage.key(for: request)
            store.close()
        }
        var info = stat()
        #expect(stat(directory.url.appendingPathComponent("secret").path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        #expect(try HTTPCache(store: store).manage.key(for: request) == first)
    }

    @Test("a store whose reads block does not delay a hit on another session sharing the process: no store I/O on Foundation's queue")
    func slowStoreDoesNotBlockOthers() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/x")
        let slow = ReadGate()
        let slowCache = HTTPCache(store: slow.store())
        let slowConfiguration = URLSessionConfiguration.ephemeral
        slowConfiguration.enableHTTPCaching(slowCache)
        let slowSession = URLSession(configuration: slowConfiguration)
        let fastCache = HTTPCache(now: TestClock().closure)
        let fastConfiguration = URLSessionConfiguration.ephemeral
        fastConfiguration.enableHTTPCaching(fastCache)
        let fastSession = URLSession(configuration: fastConfiguration)
        defer {
            slowSession.finishTasksAndInvalidate()
            fastSession.finishTasksAndInvalidate()
        }
        _ = try await fetch(fastSession, origin.url("/x"))

        async let blocked = fetch(slowSession, origin.url("/x"))
        await slow.readStarted() // the slow session's store read is now stuck
        let hit = try await fetch(fastSession, origin.url("/x"))
        #expect(hit.status == .fresh, "answered while the other session's store read is still blocked")
        slow.open()
        #expect(try await blocked.status == .miss)
    }

    @Test("changing the namespace makes every older entry a miss, in memory and on disk")
    func namespace() async throws {
        let directory = TemporaryDirectory()
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/v")
        for namespace in ["", "v2"] {
            let store = try DiskResponseStore(directory: directory.url)
            defer { store.close() }
            let cache = HTTPCache(configuration: CacheConfiguration(namespace: namespace), store: store)
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            let session = URLSession(configuration: configuration)
            defer { session.finishTasksAndInvalidate() }
            let first = try await fetch(session, origin.url("/v"))
            #expect(first.status == .miss, "namespace '\(namespace)': the other namespace's entry is never found")
            #expect(try await fetch(session, origin.url("/v")).status == .fresh)
        }
        #expect(origin.requestCount("/v") == 2)
    }

    @Test("the Host field is compared with the URL's authority after case, IPv6 brackets and the default port", arguments: [
        ("http://h/", "H", nil), ("http://h/", "h:80", nil), ("http://h:80/", "h", nil), ("https://h/", "h:443", nil),
        ("http://[::1]:8080/", "[::1]:8080", nil), ("http://[::1]/", "[::1]", nil), ("http://h:8080/", " h:8080 ", nil),
        ("http://h/", "h:8080", "h:8080"), ("http://h/", "other", "other"), ("http://h/", "OTHER:80", "other"),
        ("https://h/", "h:80", "h:80"), ("http://h/", "", nil),
    ] as [(String, String, String?)])
    func hostOverride(url: String, field: String, expected: String?) {
        #expect(KeyDerivation.hostOverride(field, of: URL(string: url)) == expected)
    }

    @Test("a Host field naming another authority than the URL's is part of the key: each host gets its own answer, as without the cache; a POST with it invalidates its entry")
    func hostFieldInTheKey() async throws {
        let h = try Harness()
        h.origin.route("/h") { request, _ in .init(headers: [("Cache-Control", "max-age=60")], text: "\(request.method) \(request.header("Host") ?? "-")") }
        let own = "127.0.0.1:\(h.origin.port)"
        let hosts: [String?] = [nil, "a.example", "b.example", "A.example", nil, own, "b.example:1"]
        let seen = try await h.sideBySide { session in
            var bodies: [String] = []
            for host in hosts {
                var request = URLRequest(url: h.origin.url("/h"))
                if let host { request.setValue(host, forHTTPHeaderField: "Host") }
                bodies.append(String(decoding: try await fetch(session, request).data, as: UTF8.self))
            }
            return bodies
        }
        #expect(seen[true]?.map { $0.lowercased() } == seen[false]?.map { $0.lowercased() }, "with the cache, then without: \(seen)")
        #expect(h.origin.requestCount("/h") == hosts.count + 4, "with the cache: the URL's own host, a.example, b.example, b.example:1")
        var post = URLRequest(url: h.origin.url("/h"))
        post.httpMethod = "POST"
        post.setValue("a.example", forHTTPHeaderField: "Host")
        _ = try await fetch(h.session, post)
        #expect(try await h.get("/h", headers: ["Host": "a.example"]).status == .miss, "the POST invalidated a.example's entry")
        #expect(try await h.get("/h").status == .fresh, "and no other")
    }
}

@Suite("One origin request per key")
struct CollapsingTests {
    @Test("a request waiting on another's answer times out as its own would, as without the cache; the one it waited on is answered")
    func waitingRequestTimesOut() async throws {
        let h = try Harness()
        var impatient = URLRequest(url: h.origin.url("/t"))
        impatient.timeoutInterval = 1
        var codes: [Bool: Int] = [:]
        for caching in [false, true] {
            let gate = LoopbackOrigin.Gate()
            var response = LoopbackOrigin.Response(text: "slow")
            response.headGate = gate
            h.origin.route("/t", response: response)
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            let leader = StartedFetch(session, URLRequest(url: h.origin.url("/t")))
            #expect(await gate.reached(count: 1, timeout: 30))
            if case .failure(let error)? = await fetchOutcome(session, impatient) { codes[caching] = (error as NSError).code }
            gate.open()
            #expect(try await leader.value.text == "slow")
        }
        #expect(codes[false] == NSURLErrorTimedOut && codes[true] == codes[false])
        #expect(h.cache.engine.flights.followers(of: try h.cache.manage.key(for: impatient)) == 0)
    }

    @Test("a delegate-based leader (its body written to the store, not kept), or one cancelled: those waiting get the whole body from the store, one origin request",
          arguments: [false, true])
    func streamingOrCancelledLeader(cancelled: Bool) async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        let body = String(repeating: "streamed ", count: 2000)
        var response = LoopbackOrigin.Response(text: body)
        response.headGate = gate
        h.origin.route("/s", response: response)
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/s")))
        let probe = ProbeDelegate()
        let leading = h.session(caching: true, cancelled ? nil : probe)
        defer { leading.finishTasksAndInvalidate() }
        let leader = leading.dataTask(with: h.origin.url("/s"))
        leader.resume()
        #expect(await gate.reached(count: 1, timeout: 30))
        let fetches = (0..<3).map { _ in StartedFetch(h.session, URLRequest(url: h.origin.url("/s"))) }
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 3 }, timeout: 30))
        if cancelled { leader.cancel() }
        gate.open()
        for fetch in fetches {
            let result = try await fetch.value
            #expect(result.text == body && result.response.statusCode == 200)
        }
        if !cancelled { #expect(String(decoding: try #require(await probe.finished()).data, as: UTF8.self) == body) }
        #expect(h.origin.requestCount("/s") == 1)
    }

    @Test("64 concurrent misses for one key: one origin request; the others are answered from it, as collapsed")
    func collapsedMisses() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        var response = LoopbackOrigin.Response(text: "shared")
        response.headGate = gate
        h.origin.route("/hot", response: response)
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/hot")))
        // Started from this task, not child tasks: they go out even when the test pool is busy.
        let fetches = (0..<64).map { _ in StartedFetch(h.session, URLRequest(url: h.origin.url("/hot"))) }
        // The origin holds the leader's answer until the 63 others wait on it.
        #expect(await gate.reached(count: 1, timeout: 30))
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 63 }, timeout: 30))
        gate.open()
        var results: [FetchResult] = []
        for fetch in fetches { results.append(try await fetch.value) }
        #expect(results.count == 64 && results.allSatisfy { $0.text == "shared" && $0.status == .miss })
        #expect(h.origin.requestCount("/hot") == 1, "one origin request however many callers")
        #expect(h.recorder.count(.collapsed) == 63)
        #expect(results.filter { $0.response.value(forHTTPHeaderField: "Cache-Status")?.contains("collapsed") == true }.count
                == h.recorder.count(.collapsed))
    }

    @Test("followers of an answer that may not be stored go to the network themselves")
    func unstorableLeader() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.routeVersioned("/private", headers: [("Cache-Control", "no-store")], holdingFirst: .head(gate))
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/private")))
        let request = URLRequest(url: h.origin.url("/private"))
        let first = StartedFetch(h.session, request)
        #expect(await gate.reached(count: 1, timeout: 30))
        let second = StartedFetch(h.session, request), third = StartedFetch(h.session, request)
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 2 }, timeout: 30))
        gate.open()
        let bodies = try await [first.value.text, second.value.text, third.value.text]
        #expect(Set(bodies).count == 3, "each caller got its own answer: \(bodies)")
        #expect(h.origin.requestCount("/private") == 3)
    }

    @Test("a follower that is cancelled does not cancel the leader")
    func cancelledFollower() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        var response = LoopbackOrigin.Response(text: "lead")
        response.headGate = gate
        h.origin.route("/slow", response: response)
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/slow")))
        let leader = StartedFetch(h.session, URLRequest(url: h.origin.url("/slow")))
        #expect(await gate.reached(count: 1, timeout: 30))
        let follower = h.session.dataTask(with: h.origin.url("/slow"))
        follower.resume()
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 1 }, timeout: 30))
        follower.cancel()
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 0 }, timeout: 30), "the cancelled follower left the flight")
        gate.open()
        #expect(try await leader.value.text == "lead")
        #expect(h.origin.requestCount("/slow") == 1)
    }

    @Test("across processes sharing a disk store, a stale key is refreshed once: the claim is the store's")
    func sharedRefreshClaim() async throws {
        let directory = TemporaryDirectory()
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/stale")
        let clock = TestClock()
        var sessions: [URLSession] = []
        var recorders: [EventRecorder] = []
        var stores: [DiskResponseStore] = []
        var caches: [HTTPCache] = []
        for _ in 0..<2 {
            let store = try DiskResponseStore(directory: directory.url)
            stores.append(store)
            let cache = HTTPCache(store: store, now: clock.closure)
            caches.append(cache)
            recorders.append(EventRecorder(cache))
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            sessions.append(URLSession(configuration: configuration))
        }
        defer {
            for session in sessions { session.finishTasksAndInvalidate() }
            for store in stores { store.close() }
        }
        _ = try await fetch(sessions[0], origin.url("/stale"))
        clock.advance(by: 100)
        // Hold the refresh at the origin so both "processes" ask while it is in flight.
        let gate = LoopbackOrigin.Gate()
        origin.route("/stale") { _, hit in
            var response = LoopbackOrigin.Response(text: "v\(hit)")
            response.headGate = gate
            return response
        }
        #expect(try await fetch(sessions[0], origin.url("/stale")).status == .stale)
        #expect(await gate.reached(count: 1))
        #expect(try await fetch(sessions[1], origin.url("/stale")).status == .stale)
        // The second process claimed the refresh in its own process, then found the store's
        // claim taken and gave its own back: no second refresh reaches the origin.
        #expect(await eventually { caches[1].engine.refreshesInFlight == 0 })
        gate.open()
        #expect(await recorders[0].wait(for: .refreshed(bodyChanged: true)))
        #expect(origin.requestCount("/stale") == 2, "one miss, one refresh: the second process found the claim taken")
    }
}
