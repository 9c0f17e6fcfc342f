import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Global registration touches process-wide state, so these run one at a time.
@Suite("No request loops, however caching is installed", .serialized)
struct LoopTests {
    func distinctMisses(_ session: URLSession, _ origin: LoopbackOrigin, count: Int = 5) async throws -> [FetchResult] {
        var results: [FetchResult] = []
        for i in 0..<count { results.append(try await fetch(session, origin.url("/loop?i=\(i)"))) }
        return results
    }

    @Test("installed in the configuration: one origin request per miss")
    func inConfiguration() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/loop")
        let results = try await distinctMisses(h.session, h.origin)
        #expect(results.allSatisfy { $0.status == .miss })
        #expect(h.origin.requestCount("/loop") == 5)
        let protocolClass: AnyClass = try #require(h.session.configuration.protocolClasses?.first)
        let binding = try #require(BindingRegistry.binding(for: protocolClass))
        #expect(binding.cache === h.cache)
        #expect(!(binding.forwarding.configuration.protocolClasses ?? []).contains { $0 is CachingURLProtocol.Type },
                "the forwarding session never contains a caching class")
    }

    /// Runs the registration probe in a new process and returns its output lines.
    func probe(_ arguments: [String] = []) throws -> [String] {
        try runProbe("registration-probe", arguments)
    }

    @Test("registered with URLProtocol.registerClass before any session: URLSession.shared is cached, one origin request per miss")
    func registered() throws {
        let lines = try probe()
        #expect(lines == ["/probe?a miss v1 ok", "/probe?b miss v2 ok", "/probe?a fresh v1 ok",
                          "/probe?c miss v3 ok", "/probe?b fresh v2 ok", "origin 3"])
    }

    @Test("Foundation 6.3.1: an event handler that starts a task where a memory hit's event happens (the shared URLSession queue) traps the process; after a hop it works (README, HTTPCache.observe)")
    func handlerStartingATask() throws {
        let hopping = try runProbe("registration-probe", ["--handler-starts-task", "--hop"])
        #expect(hopping == ["started"])
        let signal = try Self.trap(["--handler-starts-task"])
        #expect(signal == SIGILL || signal == SIGTRAP, "a task started on the shared queue: \(signal.map { "signal \($0)" } ?? "no trap")")
    }

    /// Runs the registration probe in a mode that should stop it, with no Swift backtracer
    /// (a backtracer left behind keeps the probe's descriptors open); the signal that ended it,
    /// nil if it exited (or was still running after 60 s, when it is killed).
    static func trap(_ arguments: [String]) throws -> Int32? {
        let process = try ChildProcess(builtExecutable(named: "registration-probe").path, arguments,
                                       environment: ["SWIFT_BACKTRACE": "enable=no"])
        guard process.waitForExit(timeout: 60) else { return nil }
        return process.terminatingSignal
    }

    @Test("Foundation 6.3.1 traps on a chunked answer that ends with a trailer field, with or without the cache (README)",
          arguments: [false, true])
    func trailerTraps(caching: Bool) throws {
        let signal = try Self.trap(["--trailer-answer"] + (caching ? ["--caching"] : []))
        #expect(signal == SIGILL || signal == SIGTRAP, "\(signal.map { "signal \($0)" } ?? "no trap")")
    }

    @Test("registered and in the configuration, in a fresh process: one origin request per miss")
    func registeredAndConfigured() throws {
        let lines = try probe(["--both"])
        #expect(lines.last == "origin 3")
        #expect(lines.filter { $0.contains(" fresh ") }.count == 2)
    }

    @Test("registered after sessions exist: the built-in HTTP class answers first, so nothing is cached and nothing loops")
    func registeredLate() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/loop")
        _ = URLSession(configuration: .ephemeral) // sessions exist: the built-in classes are registered
        let registeredClass: AnyClass = CachingURLProtocol.installation(for: HTTPCache()).protocolClass
        #expect(URLProtocol.registerClass(registeredClass))
        defer { URLProtocol.unregisterClass(registeredClass) }
        let plain = URLSession(configuration: .ephemeral)
        let results = try await distinctMisses(plain, origin)
        #expect(results.allSatisfy { $0.status == nil })
        #expect(origin.requestCount("/loop") == 5)
    }

    @Test("both registered and in the configuration: still one origin request per miss")
    func both() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/loop")
        #expect(URLProtocol.registerClass(CachingURLProtocol.self))
        defer { URLProtocol.unregisterClass(CachingURLProtocol.self) }
        let registeredClass: AnyClass = CachingURLProtocol.installation(for: h.cache).protocolClass
        #expect(URLProtocol.registerClass(registeredClass))
        defer { URLProtocol.unregisterClass(registeredClass) }
        let results = try await distinctMisses(h.session, h.origin)
        #expect(results.allSatisfy { $0.status == .miss })
        #expect(h.origin.requestCount("/loop") == 5)
        #expect(h.recorder.count(.served(.miss)) == 5)
    }

    @Test("installing twice on one configuration replaces the first installation")
    func installTwice() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache())
        let second = HTTPCache()
        configuration.enableHTTPCaching(second)
        #expect((configuration.protocolClasses ?? []).filter { $0 is CachingURLProtocol.Type }.count == 1)
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/loop")
        _ = try await fetch(URLSession(configuration: configuration), origin.url("/loop"))
        #expect(second.store.entryCount == 1)
        #expect(origin.requestCount() == 1)
    }

    @Test("the handled marker is set on forwarded requests, and canInit refuses what carries it where properties survive")
    func marker() {
        let request = URLRequest(url: URL(string: "http://example.test/")!)
        let forwarded = Hop.forwardingRequest(from: request, conditional: [:])
        #expect(CachingURLProtocol.canInit(with: request))
        // On Linux the bridge to URLRequest drops protocol properties (the fact that makes the
        // separate forwarding session necessary). This fails, and tells us, if that changes.
        #if canImport(FoundationNetworking)
        #expect(URLProtocol.property(forKey: CachingURLProtocol.handledKey, in: forwarded) == nil)
        #else
        #expect(!CachingURLProtocol.canInit(with: forwarded))
        #endif
    }
}

@Suite("Faults: the caller gets the error, the store is unchanged, nothing crashes")
struct FaultTests {
    @Test("reset, truncated body: the error reaches the caller and nothing is stored",
          arguments: [LoopbackOrigin.Fault.reset, .truncate])
    func networkFaults(fault: LoopbackOrigin.Fault) async throws {
        let h = try Harness()
        h.origin.route("/bad", response: .init(text: String(repeating: "x", count: 10_000)).withFault(fault))
        await #expect(throws: (any Error).self) { try await h.get("/bad") }
        #expect(h.cache.store.entryCount == 0)
        #expect(h.recorder.count(.stored) == 0)
    }

    @Test("a timeout reaches the caller as an error")
    func timeout() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        let h = try Harness(sessionConfiguration: configuration)
        h.origin.route("/hang", response: .init(fault: .hang))
        do {
            _ = try await h.get("/hang")
            Issue.record("expected a timeout")
        } catch {
            #expect((error as? URLError)?.code == .timedOut)
        }
        #expect(h.cache.store.entryCount == 0)
    }

    @Test("a request's own timeoutInterval holds through the cache, as without it (the session's is longer), after a redirect too",
          arguments: ["/hang", "/to-hang"])
    func requestTimeout(path: String) async throws {
        let h = try Harness()
        h.origin.route("/hang", response: .init(fault: .hang))
        h.origin.routeRedirect("/to-hang", to: "/hang")
        var request = URLRequest(url: h.origin.url(path))
        request.timeoutInterval = 1
        // The session's timeout is 600 s: an answer within 60 s (not asserted sooner, as a
        // busy test run resumes awaits late) comes from the request's own.
        let long: (URLSessionConfiguration) -> Void = { $0.timeoutIntervalForRequest = 600 }
        for caching in [false, true] {
            let session = h.session(caching: caching, configure: long)
            defer { session.invalidateAndCancel() }
            let outcome = Watched<String?>(nil)
            session.dataTask(with: request) { _, _, error in
                outcome.update { $0 = error.map { "\(($0 as NSError).code)" } ?? "answered" }
            }.resume()
            #expect(await outcome.wait(timeout: 60) { $0 != nil }, "caching \(caching): no answer in 60 s (the session's timeout applied)")
            #expect(outcome.value == "\(NSURLErrorTimedOut)", "caching \(caching)")
        }
    }

    @Test("a failing refresh keeps the usable entry and never answers the caller twice",
          arguments: [LoopbackOrigin.Fault.reset, .truncate])
    func failingRefresh(fault: LoopbackOrigin.Fault) async throws {
        let h = try Harness()
        h.origin.route("/r") { _, hit in
            hit == 1 ? .init(text: "good") : LoopbackOrigin.Response(text: "partial-body").withFault(fault)
        }
        _ = try await h.get("/r")
        h.clock.advance(by: 120)
        let stale = try await h.get("/r")
        #expect(stale.status == .stale && stale.text == "good")
        #expect(await h.recorder.wait { events in events.contains { $0.kind.name == "refreshFailed" } })
        let again = try await h.get("/r")
        #expect(again.status == .stale && again.text == "good", "the stale entry survives the failed refresh")
        #expect(h.cache.store.entryCount == 1)
    }

    @Test("a refresh answered with a 5xx keeps the stale entry")
    func refreshServerError() async throws {
        let h = try Harness()
        h.origin.route("/e") { _, hit in hit == 1 ? .init(text: "good") : .init(status: 503, text: "down") }
        _ = try await h.get("/e")
        h.clock.advance(by: 120)
        _ = try await h.get("/e")
        #expect(await h.recorder.wait { events in events.contains { $0.kind.name == "refreshFailed" } })
        #expect(try await h.get("/e").text == "good")
    }

    @Test("cancelling a forwarded task cancels the forwarded request and never calls the client again, 60 times")
    func cancellation() async throws {
        let h = try Harness()
        for round in 0..<60 {
            h.origin.route("/slow/\(round)", response: .init(fault: .hang))
            let calls = CallCounter()
            let done = DispatchSemaphore(value: 0)
            let task = h.session.dataTask(with: h.origin.url("/slow/\(round)")) { _, _, error in
                calls.record(error)
                done.signal()
            }
            task.resume()
            if round % 3 != 0 {
                // Cancel once the origin holds the forwarded request; otherwise at once.
                #expect(await h.origin.requests("/slow/\(round)", count: 1, timeout: 10))
            }
            task.cancel()
            #expect(await calls.waitForFirst(timeout: 10))
            #expect(calls.codes == [URLError.cancelled.rawValue], "round \(round)")
        }
        #expect(await h.origin.openConnections(atMost: 0, timeout: 10), "every forwarded request was cancelled")
        #expect(h.cache.store.entryCount == 0)
    }

    @Test("cancelling a request that could fall back ends it quietly: no fallback, no event, the entry kept")
    func cancelWithFallback() async throws {
        let h = try Harness()
        h.origin.route("/cf") { _, hit in hit == 1 ? .init(text: "old") : .init(fault: .hang) }
        _ = try await h.get("/cf")
        h.clock.advance(by: 3 * 86_400) // expired, inside the error window
        let calls = CallCounter()
        let task = h.session.dataTask(with: h.origin.url("/cf")) { _, _, error in calls.record(error) }
        task.resume()
        #expect(await h.origin.requests("/cf", count: 2))
        task.cancel()
        #expect(await calls.waitForFirst(timeout: 10))
        #expect(calls.codes == [URLError.cancelled.rawValue])
        #expect(await h.origin.openConnections(atMost: 0, timeout: 10))
        #expect(h.recorder.count(.served(.fallback)) == 0)
        #expect(h.cache.entryCount == 1)
    }
}

@Suite("Concurrency")
struct ConcurrencyTests {
    @Test("100 concurrent requests to one stale key: all answered at once, exactly one origin refresh")
    func concurrentStale() async throws {
        let h = try Harness()
        let gate = DispatchSemaphore(value: 0)
        h.origin.route("/hot") { _, hit in
            if hit > 1 { _ = gate.wait(timeout: .now() + 20) } // hold the refresh until all are answered
            return .init(text: "v\(hit)")
        }
        _ = try await h.get("/hot")
        h.clock.advance(by: 61)
        let results = try await withThrowingTaskGroup(of: FetchResult.self) { group in
            for _ in 0..<100 { group.addTask { try await h.get("/hot") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.status == .stale && $0.text == "v1" })
        gate.signal()
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        #expect(h.origin.requestCount("/hot") == 2, "one miss, one refresh")
        #expect(h.recorder.count(.served(.stale)) == 100)
        #expect(h.cache.engine.refreshesInFlight == 0)
        #expect(try await h.get("/hot").text == "v2")
    }

    @Test("a stale answer arrives after its background refresh has been claimed")
    func refreshClaimedFirst() async throws {
        let h = try Harness()
        let gate = DispatchSemaphore(value: 0)
        h.origin.route("/g") { _, hit in
            if hit > 1 { _ = gate.wait(timeout: .now() + 20) } // hold the refresh
            return .init(text: "v\(hit)")
        }
        _ = try await h.get("/g")
        h.clock.advance(by: 61)
        for _ in 0..<20 {
            #expect(try await h.get("/g").status == .stale)
            #expect(h.cache.engine.refreshesInFlight == 1, "visible as soon as the caller is answered")
        }
        gate.signal()
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        #expect(h.cache.engine.refreshesInFlight == 0)
        #expect(h.origin.requestCount("/g") == 2)
    }

    @Test("many concurrent misses on distinct keys are all answered and stored")
    func concurrentMisses() async throws {
        let h = try Harness()
        h.origin.route("/k") { request, _ in .init(text: request.target) }
        let results = try await withThrowingTaskGroup(of: (Int, FetchResult).self) { group in
            for i in 0..<50 { group.addTask { (i, try await h.get("/k?i=\(i)")) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.1.text == "/k?i=\($0.0)" })
        #expect(h.cache.store.entryCount == 50)
    }
}

extension LoopbackOrigin.Response {
    func withFault(_ fault: LoopbackOrigin.Fault) -> Self {
        var copy = self
        copy.fault = fault
        return copy
    }
}

/// Counts completion calls and waits for the first without sleeping.
final class CallCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Int] = []
    private var waiter: CheckedContinuation<Bool, Never>?

    func record(_ error: (any Error)?) {
        let waiting = lock.withLock { () -> CheckedContinuation<Bool, Never>? in
            recorded.append((error as? URLError)?.code.rawValue ?? 0)
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume(returning: true)
    }

    var codes: [Int] { lock.withLock { recorded } }

    func waitForFirst(timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            let ready = lock.withLock { () -> Bool in
                if !recorded.isEmpty { return true }
                waiter = continuation
                return false
            }
            if ready { continuation.resume(returning: true); return }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                let waiting = lock.withLock { () -> CheckedContinuation<Bool, Never>? in
                    defer { waiter = nil }
                    return waiter
                }
                waiting?.resume(returning: false)
            }
        }
    }
}
