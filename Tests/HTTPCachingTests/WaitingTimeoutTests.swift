import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// A request that waits on another's answer (a collapsed miss) times out as its own request
/// would: its timeout counts from the start of its wait, also when it then sends its own, and
/// each hop of a redirect has its own. The cache's timers are held (`Deadlines.holdForTests`)
/// and run by the tests, which move time instead of waiting for it.
@Suite("A waiting request's timeout")
struct WaitingTimeoutTests {
    /// A request for `url` with a timeout of 600 s, started once another waits at the origin:
    /// it waits on that one's answer. Returns it and its wait's deadline, taken from those held
    /// (`held` in all, counting the others the test expects).
    static func follower(_ h: Harness, _ url: URL, held: Int = 1) async -> (StartedFetch, [Deadlines.Held]) {
        var impatient = URLRequest(url: url)
        impatient.timeoutInterval = 600
        let follower = StartedFetch(h.session, impatient)
        #expect(await h.cache.engine.deadlines.held(total: held, timeout: 30), "it waits on the leader, under its timeout")
        let wait = h.cache.engine.deadlines.takeHeld { $0.seconds == 600 }
        #expect(wait.count == 1)
        return (follower, wait)
    }

    /// The code the fetch ended with: nil for an answer.
    static func code(_ fetch: StartedFetch) async -> Int? {
        do { _ = try await fetch.value; return nil } catch { return (error as NSError).code }
    }

    @Test("a request that waited, then had to send its own (the one it waited on was cancelled), times out when its own timeout from the start of its wait has passed, its request cancelled, not a whole timeout after sending")
    func waitedThenSentTimesOut() async throws {
        let h = try Harness()
        h.cache.engine.deadlines.holdForTests()
        let gate = LoopbackOrigin.Gate() // opened only at the end: nothing answers either request before
        var response = LoopbackOrigin.Response(text: "late")
        response.headGate = gate
        h.origin.route("/stall", response: response)
        let url = h.origin.url("/stall")
        // Sent by Foundation's own class, the leader is cancelled with its task, never detached.
        let leader = h.session.dataTask(with: url) { _, _, _ in }
        leader.resume()
        #expect(await gate.reached(count: 1, timeout: 30))
        let (follower, waits) = await Self.follower(h, url)
        leader.cancel()
        #expect(await gate.reached(count: 2, timeout: 30), "it sent its own request")
        for wait in waits { wait.work() } // 600 s from the start of its wait have passed
        let ended = await follower.ends(within: 30)
        gate.open()
        #expect(ended, "it ended when its timeout had passed, not 600 s after sending")
        #expect(await Self.code(follower) == NSURLErrorTimedOut)
        #expect(try await h.get("/stall").text == "late", "nothing was stored for it; the next request goes out")
    }

    @Test("a redirect's next hop has a timeout of its own: the first hop's wait timing out later does not cut the second hop's request")
    func eachHopItsOwnTimeout() async throws {
        let h = try Harness()
        h.cache.engine.deadlines.holdForTests()
        let first = LoopbackOrigin.Gate(), second = LoopbackOrigin.Gate(), third = LoopbackOrigin.Gate()
        defer { first.open(); second.open(); third.open() }
        let target = h.origin.url("/target").absoluteString
        h.origin.route("/r") { _, hit in
            guard hit > 1 else {
                var held = LoopbackOrigin.Response(text: "never")
                held.headGate = first
                return held
            }
            return LoopbackOrigin.Response(status: 302, headers: [("Location", target)], text: "moved")
        }
        h.origin.route("/target") { _, hit in
            var held = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "target \(hit)")
            held.headGate = hit == 1 ? second : third
            return held
        }
        let leaderOfR = h.session.dataTask(with: h.origin.url("/r")) { _, _, _ in }
        leaderOfR.resume()
        #expect(await first.reached(count: 1, timeout: 30))
        let (follower, firstHopTimer) = await Self.follower(h, h.origin.url("/r")) // its first hop waits on /r's leader
        let leaderOfTarget = h.session.dataTask(with: h.origin.url("/target")) { _, _, _ in }
        leaderOfTarget.resume()
        #expect(await second.reached(count: 1, timeout: 30))
        leaderOfR.cancel() // it sends /r itself, is redirected to /target, and waits on its leader
        #expect(await h.cache.engine.deadlines.held(total: 2, timeout: 30), "its second hop waits on /target's leader")
        leaderOfTarget.cancel() // it sends /target itself
        #expect(await third.reached(count: 1, timeout: 30), "its second hop sent its own request")
        for wait in firstHopTimer { wait.work() } // the first hop's wait began 600 s ago
        third.open()
        let answer = try await follower.value
        #expect(answer.text == "target 2", "the second hop's request was not cancelled by the first hop's timer")
        #expect(h.origin.requestCount("/target") == 2)
    }

    @Test("on a store shared by processes, a request sent again after its wait that waits on another process's fill: its timeout ends the wait, and it never takes the fill claim after")
    func timedOutWhileWaitingOnAFill() async throws {
        let directory = TemporaryDirectory()
        var configuration = CacheConfiguration()
        configuration.sharedFillLease = 3_600 // no lease runs out however slowly a loaded machine runs the test
        let h = try Harness(configuration: configuration, store: DiskResponseStore(directory: directory.url))
        let other = try DiskResponseStore(directory: directory.url) // another process on the same directory
        defer { other.close() }
        h.cache.engine.deadlines.holdForTests()
        h.origin.route("/fill", response: .init(headers: [("Cache-Control", "max-age=60")], text: "filled"))
        let url = h.origin.url("/fill")
        let claim = try h.cache.manage.key(for: URLRequest(url: url)).sharedFillClaim
        #expect(other.claimRefresh(of: claim, lease: 3_600), "the other process is filling the key")
        let leader = StartedFetch(h.session, URLRequest(url: url))
        #expect(await h.recorder.wait(for: .waitingForSharedFill, count: 1, timeout: 30), "the leader waits on the other process")
        let (follower, waits) = await Self.follower(h, url, held: 2) // beside the leader's next look at the store
        leader.task.cancel()
        #expect(await leader.ends(within: 30))
        // Others wait on it: it went on for them (detached), until its next look finds it stopped.
        for look in h.cache.engine.deadlines.takeHeld() { look.work() }
        #expect(await h.recorder.wait(for: .waitingForSharedFill, count: 2, timeout: 30), "sent again, it waits on the other process in turn")
        #expect(await h.cache.engine.deadlines.held(total: 3, timeout: 30), "its next look at the store is held")
        for wait in waits { wait.work() } // 600 s from the start of its wait have passed
        #expect(await follower.ends(within: 30))
        #expect(await Self.code(follower) == NSURLErrorTimedOut)
        other.releaseRefresh(of: claim) // the other process stored nothing and let go
        for look in h.cache.engine.deadlines.takeHeld() { look.work() } // every look at the store still due
        #expect(other.claimRefresh(of: claim, lease: 3_600), "nobody here fetches the key any more: its fill claim is free")
        #expect(h.origin.requestCount("/fill") == 0)
    }

    @Test("a request sent again after its wait whose 304 selects nothing asks once more, unconditionally, under a timeout of its own: its wait's timer does not cut that request")
    func retryAfterAHeadItsOwnTimeout() async throws {
        let h = try Harness()
        h.cache.engine.deadlines.holdForTests()
        let leaderHead = LoopbackOrigin.Gate(), retryHead = LoopbackOrigin.Gate()
        defer { leaderHead.open(); retryHead.open() }
        h.origin.route("/v") { _, hit in
            switch hit {
            case 1: return .init(headers: [("Cache-Control", "max-age=1"), ("ETag", "\"a\"")], text: "v1")
            case 2: // the leader's revalidation: an answer that may not be stored, so those waiting go out
                var held = LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], text: "v2")
                held.headGate = leaderHead
                return held
            case 3: return .init(status: 304, headers: [("ETag", "\"b\"")], body: Data()) // selects no stored response
            default:
                var held = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "v\(hit)")
                held.headGate = retryHead
                return held
            }
        }
        _ = try await h.get("/v")
        h.clock.advance(by: 3 * 86_400) // expired, with a validator: revalidated
        let leader = StartedFetch(h.session, URLRequest(url: h.origin.url("/v")))
        #expect(await leaderHead.reached(count: 1, timeout: 30))
        let (follower, waits) = await Self.follower(h, h.origin.url("/v"))
        leaderHead.open()
        #expect(try await leader.value.text == "v2")
        #expect(await retryHead.reached(count: 1, timeout: 30), "its own request got a 304 that selects nothing, and it asked again")
        for wait in waits { wait.work() } // 600 s from the start of its wait: the retry's head is not due yet
        retryHead.open()
        #expect(try await follower.value.text == "v4", "the retry was not cut by the wait's timer")
    }
}
