import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
@testable import HTTPCaching

/// A completion-handler task's miss, sent by Foundation's own HTTP class on the task itself
/// (`DirectForward`): what the caller and the origin see, cancelling and suspending it, and
/// the flight it leads.
@Suite("Misses sent by Foundation's own class on the caller's task")
struct DirectForwardTests {
    /// One completion-handler task, awaited, with the task kept to read its counters.
    private static func run(_ session: URLSession, _ url: URL) async -> (data: Data?, response: HTTPURLResponse?, error: Int?, task: URLSessionDataTask) {
        let box = TaskBox()
        let (data, response, error) = await withCheckedContinuation { continuation in
            let task = session.dataTask(with: url) { data, response, error in
                continuation.resume(returning: (data, response as? HTTPURLResponse, (error as? URLError)?.errorCode))
            }
            box.task = task
            task.resume()
        }
        return (data, response, error, box.task!)
    }

    private final class TaskBox: @unchecked Sendable { var task: URLSessionDataTask? }

    @Test("a miss reaches the origin as without the cache (the same request fields) and the caller gets what it would, plus Cache-Status; the task's counters are Foundation's own")
    func sameAsWithout() async throws {
        let h = try Harness()
        h.origin.route("/doc", response: .init(headers: [("Cache-Control", "max-age=60"), ("ETag", "\"a\"")], body: Data(count: 5000)))
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            let miss = await Self.run(session, h.origin.url("/doc"))
            #expect(miss.error == nil && miss.data?.count == 5000 && miss.response?.statusCode == 200)
            #expect(miss.task.countOfBytesExpectedToReceive == 5000, "set by Foundation's own class only")
            #expect((miss.response?.value(forHTTPHeaderField: "Cache-Status") != nil) == caching)
            let sent = try #require(h.origin.requests(for: "/doc").last)
            seen[caching] = sent.headers.map { "\($0.name): \($0.value)" }.sorted()
        }
        #expect(seen[true] == seen[false], "the request as the origin got it, with the cache and without")
        let hit = await Self.run(h.session, h.origin.url("/doc"))
        #expect(hit.response?.cacheStatus == .fresh && hit.data?.count == 5000)
        #expect(h.origin.requestCount("/doc") == 2, "one request each way; the hit reached nothing")
    }

    @Test("a miss that fails fails as without the cache: the same error, and task.error set (by Foundation's own class)")
    func failure() async throws {
        let h = try Harness()
        h.origin.route("/gone", response: .init(fault: .reset))
        var seen: [Bool: (Int?, Bool)] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            let run = await Self.run(session, h.origin.url("/gone"))
            seen[caching] = (run.error, run.task.error != nil)
        }
        #expect(seen[true]?.0 != nil && seen[true]?.0 == seen[false]?.0)
        #expect(seen[true]?.1 == true && seen[false]?.1 == true)
    }

    @Test("a session that adds fields its cache's keys were not made with (set on the configuration after enableHTTPCaching) never has its misses sent by Foundation's own class: what they bring is not another session's")
    func sessionFieldsAddedLater() async throws {
        let h = try Harness()
        h.origin.route("/me") { request, _ in
            .init(headers: [("Cache-Control", "max-age=60")], text: "user \(request.header("Authorization") ?? "none")")
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(h.cache)
        configuration.httpAdditionalHeaders = ["Authorization": "Bearer alice"]
        let alice = URLSession(configuration: configuration)
        defer { alice.finishTasksAndInvalidate() }
        _ = try await fetch(alice, h.origin.url("/me"))
        let other = try await h.get("/me")
        #expect(!other.text.contains("alice"), "\(other.text)")
    }

    @Test("a redirect back to the same URL, followed inside Foundation's own class with the cookie it set: the answer is delivered, never stored as that URL's")
    func redirectToItself() async throws {
        let h = try Harness()
        h.origin.route("/acct") { request, _ in
            guard let cookie = request.header("Cookie") else {
                return .init(status: 302, headers: [("Location", "/acct"), ("Set-Cookie", "s=1; Path=/")], text: "")
            }
            return .init(headers: [("Cache-Control", "max-age=60")], text: "account of \(cookie)")
        }
        let first = try await h.get("/acct")
        #expect(first.text == "account of s=1")
        #expect(first.response.value(forHTTPHeaderField: "Cache-Status")?.contains("not-stored-redirected") == true)
        #expect(h.cache.store.entryCount == 0)
        let stranger = URLSessionConfiguration.ephemeral
        stranger.httpCookieStorage = nil
        stranger.enableHTTPCaching(h.cache)
        let session = URLSession(configuration: stranger)
        defer { session.finishTasksAndInvalidate() }
        // Without cookies the origin redirects it forever (-1007, as without the cache).
        let second = try? await fetch(session, h.origin.url("/acct"))
        #expect(second?.text != "account of s=1", "not the first session's account")
        #expect(h.origin.requestCount("/acct") > 2)
    }

    @Test("cancel() while the body is on its way: -999 once, nothing stored, and the next request goes out and is stored")
    func cancelled() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.routeVersioned("/slow", prefix: "body ", headers: [("Cache-Control", "max-age=60")], holdingFirst: .body(gate))
        let calls = Watched(0)
        let ended = await withCheckedContinuation { continuation in
            let task = h.session.dataTask(with: h.origin.url("/slow")) { _, _, error in
                calls.update { $0 += 1 }
                continuation.resume(returning: (error as? URLError)?.errorCode)
            }
            task.resume()
            Task {
                _ = await gate.reached()
                task.cancel()
            }
        }
        gate.open()
        #expect(ended == NSURLErrorCancelled)
        #expect(h.cache.store.entryCount == 0)
        let next = try await h.get("/slow")
        #expect(next.text == "body 2" && next.status == .miss)
        #expect(try await h.get("/slow").status == .fresh)
        #expect(calls.value == 1, "the cancelled task's handler ran once")
        #expect(h.recorder.count(where: { "\($0)".contains("notStored") }) == 0)
    }

    @Test("suspend() while the body is on its way, then resume(): the whole answer, once, stored")
    func suspended() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.route("/paused", response: {
            var response = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: Data(count: 70_000))
            response.bodyGate = gate
            return response
        }())
        let result = await withCheckedContinuation { continuation in
            let task = h.session.dataTask(with: h.origin.url("/paused")) { data, response, error in
                continuation.resume(returning: (data?.count, (response as? HTTPURLResponse)?.cacheStatus, error))
            }
            task.resume()
            Task {
                _ = await gate.reached()
                task.suspend()
                TaskIntrospection.workQueue(of: task)?.sync {} // its stopLoading has run
                gate.open()
                task.resume()
            }
        }
        #expect(result.0 == 70_000 && result.1 == .miss && result.2 == nil)
        #expect(try await h.get("/paused").status == .fresh)
        #expect(h.origin.requestCount("/paused") == 1)
    }

    @Test("suspend(); resume() in a row on a running miss, sent directly or forwarded (a session with a delegate): the answer arrives, once, and is stored",
          arguments: [false, true])
    func suspendResumeAtOnce(delegate: Bool) async throws {
        let h = try Harness()
        let session = delegate ? h.session(caching: true, ProbeDelegate()) : h.session
        defer { if delegate { session.finishTasksAndInvalidate() } }
        let gate = LoopbackOrigin.Gate()
        h.origin.route("/bounce", response: {
            var response = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "ok")
            response.headGate = gate
            return response
        }())
        let calls = Watched(0)
        let ended = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: h.origin.url("/bounce")) { data, _, error in
            if error == nil, data == Data("ok".utf8) { calls.update { $0 += 1 } }
            ended.signal()
        }
        task.resume()
        _ = await gate.reached()
        task.suspend()
        task.resume()
        TaskIntrospection.workQueue(of: task)?.sync {} // the queued stopLoading and startLoading have run
        gate.open()
        let answered = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: ended.wait(timeout: .now() + 10) == .success) }
        }
        #expect(answered && calls.value == 1)
        #expect(try await fetch(session, h.origin.url("/bounce")).status == .fresh)
    }

    @Test("a miss leading its key's flight is cancelled: the request waiting on it goes out itself and gets its answer")
    func leaderCancelled() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        h.origin.routeVersioned("/shared", prefix: "answer ", headers: [("Cache-Control", "max-age=60")], holdingFirst: .head(gate))
        let key = try h.cache.manage.key(for: URLRequest(url: h.origin.url("/shared")))
        let leader = h.session.dataTask(with: h.origin.url("/shared")) { _, _, _ in }
        leader.resume()
        _ = await gate.reached()
        let follower = StartedFetch(h.session, URLRequest(url: h.origin.url("/shared")))
        #expect(await h.cache.engine.flights.followers(of: key, until: { $0 == 1 }, timeout: 10))
        leader.cancel()
        let answer = try await follower.value
        gate.open()
        #expect(answer.text == "answer 2" && answer.response.statusCode == 200)
        #expect(h.origin.requestCount("/shared") == 2)
    }
}
