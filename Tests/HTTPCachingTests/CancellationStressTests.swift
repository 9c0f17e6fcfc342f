import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// Cancellation raced against deliveries: a task may end (cancelled, its session invalidated,
/// its Swift task cancelled) at any moment while the cache answers it from the store or from
/// the network. On Linux a client call for a task that has ended, or one made while the
/// session changes its task registry, traps; the cache must never make one.
@Suite("Cancellation races against deliveries")
struct CancellationStressTests {
    /// Counts how every task ended.
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var started = 0
        private(set) var ended = 0
        private(set) var doubleEnds = 0
        private(set) var lateCalls = 0
        private(set) var cancelled = 0
        private(set) var answered = 0
        private(set) var wrongBodies = 0
        private var endedIDs = Set<Int>()
        private let allEnded = Watched(0)

        func start() -> Int {
            lock.withLock {
                started += 1
                return started
            }
        }

        func end(_ id: Int, error: (any Error)?, body: Data?, expected: Data?) {
            let total: Int = lock.withLock {
                if !endedIDs.insert(id).inserted {
                    doubleEnds += 1
                    return ended
                }
                ended += 1
                if let error {
                    if (error as NSError).code == NSURLErrorCancelled { cancelled += 1 }
                } else {
                    answered += 1
                    if let expected, body != expected { wrongBodies += 1 }
                }
                return ended
            }
            // Two ends may report out of order: the count only grows (a late, smaller total once
            // overwrote the last one, and the wait for all of them timed out with all ended).
            allEnded.update { $0 = max($0, total) }
        }

        func late() { lock.withLock { lateCalls += 1 } }

        func waitForAll(_ count: Int, timeout: TimeInterval) async -> Bool {
            await allEnded.wait(timeout: timeout) { $0 >= count }
        }
    }

    /// A session delegate that reports each task's end once and counts any call after it.
    final class RacingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        let tally: Tally
        private let lock = NSLock()
        private var ids: [Int: (id: Int, expected: Data?)] = [:]
        private var bodies: [Int: Data] = [:]
        private var done = Set<Int>()

        init(tally: Tally) { self.tally = tally }

        func track(_ task: URLSessionTask, id: Int, expected: Data?) {
            lock.withLock { ids[task.taskIdentifier] = (id, expected) }
        }

        private func isDone(_ task: URLSessionTask) -> Bool {
            lock.withLock { done.contains(task.taskIdentifier) }
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
            if isDone(dataTask) { tally.late() }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            if isDone(dataTask) { tally.late() }
            lock.withLock { bodies[dataTask.taskIdentifier, default: Data()].append(data) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            let (tracked, body) = lock.withLock { () -> ((id: Int, expected: Data?)?, Data?) in
                done.insert(task.taskIdentifier)
                return (ids[task.taskIdentifier], bodies.removeValue(forKey: task.taskIdentifier))
            }
            guard let tracked else { return }
            tally.end(tracked.id, error: error, body: body ?? Data(), expected: tracked.expected)
        }
    }

    enum Ending: CaseIterable {
        case none, cancelAtOnce, cancelSoon, cancelFromDelegateQueue
    }

    /// The seed of the random choices (which path each task asks for, how it ends); fresh each
    /// run unless `HTTP_CACHING_STRESS_SEED` names one. A failure prints it. The seed fixes the
    /// choices, not the threads' timing, so a replay makes the same tasks, not the same race.
    static let seedVariable = "HTTP_CACHING_STRESS_SEED"
    static let seed = environmentSeed(seedVariable) ?? UInt64.random(in: .min ... .max)

    /// Network answers of several chunks: each is a client call of its own.
    static let filler = String(repeating: "x", count: 48_000)

    @Test("thousands of tasks — hits and misses, delegates, completion handlers, data(for:) — cancelled, invalidated and abandoned at random: no crash, each ends once, none hangs",
          .timeLimit(.minutes(1)), arguments: [false, true])
    func raceCancellationAgainstDeliveries(memoryHits: Bool) async throws {
        // Hits from memory are answered inside startLoading; from a store that needs I/O they
        // are answered later, from the cache's I/O queue, like every network answer.
        let h = try Harness(store: memoryHits ? MemoryResponseStore() : ioPathStore())
        let paths = try await Self.routeAndFill(h)
        let tally = Tally()
        var generator = SeededGenerator(seed: Self.seed)
        var launched = 0
        let deadline = Date().addingTimeInterval(2)
        var round = 0
        while Date() < deadline || round < 4 {
            round += 1
            launched += await runRound(round, h: h, paths: paths, tally: tally, generator: &generator)
        }
        let seed = "seed \(hexSeed(Self.seed)) (replay its choices: \(Self.seedVariable)=\(hexSeed(Self.seed)))"
        #expect(await tally.waitForAll(launched, timeout: 20), "every task ended: \(tally.ended) of \(launched), \(seed)")
        #expect(tally.doubleEnds == 0, "\(seed)")
        #expect(tally.lateCalls == 0, "no delegate call after a task ended, \(seed)")
        #expect(tally.wrongBodies == 0, "an answer, when there is one, is whole and right, \(seed)")
        #expect(tally.cancelled > 0 && tally.answered > 0,
                "both outcomes were exercised: \(tally.cancelled) cancelled, \(tally.answered) answered, \(seed)")
        #expect(launched >= 480, "\(seed)")
    }

    /// Routes 40 paths that are stored once fetched, and fetches them; routes `/miss` (stored)
    /// and `/bypass` (never stored), whose answers name their request.
    /// - Returns: the stored paths.
    static func routeAndFill(_ h: Harness) async throws -> [String] {
        let paths = (0..<40).map { "/hit/\($0)" }
        for path in paths {
            h.origin.route(path, response: .init(headers: [("Cache-Control", "max-age=600")], text: "body of \(path)"))
            _ = try await h.get(path)
        }
        h.origin.route("/miss") { request, _ in .init(headers: [("Cache-Control", "max-age=600")], text: "miss \(request.target)" + filler) }
        h.origin.route("/bypass") { request, _ in .init(headers: [("Cache-Control", "no-store")], text: "bypass \(request.target)" + filler) }
        return paths
    }

    /// One round: 300 tasks on a new session, a third each with a delegate, a completion
    /// handler and data(for:), ended at random; then the session invalidated (cancelling what
    /// runs, every other round).
    /// - Returns: how many tasks it launched.
    func runRound(_ round: Int, h: Harness, paths: [String], tally: Tally, generator: inout SeededGenerator) async -> Int {
        let delegate = RacingDelegate(tally: tally)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(h.cache)
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        // data(for:) creates its task when its Swift task runs: on a session invalidated
        // only once they are all done (creating a task on an invalidated one traps).
        let asyncSession = URLSession(configuration: configuration)
        var swiftTasks: [Task<Void, Never>] = []
        for index in 0..<300 {
            let id = tally.start()
            let (path, expected) = Self.target(round: round, index: index, paths: paths, generator: &generator)
            let request = URLRequest(url: h.origin.url(path))
            let ending = Ending.allCases.randomElement(using: &generator)!
            switch index % 3 {
            case 0: // delegate
                let task = session.dataTask(with: request)
                delegate.track(task, id: id, expected: expected)
                task.resume()
                end(task, ending, session: session)
            case 1: // completion handler
                let task = session.dataTask(with: request) { data, _, error in
                    tally.end(id, error: error, body: data, expected: expected)
                }
                task.resume()
                end(task, ending, session: session)
            default: // async data(for:), its Swift task cancelled at random
                swiftTasks.append(Self.fetch(request, on: asyncSession, cancelFirst: ending != .none, id: id, expected: expected, tally: tally))
            }
        }
        if round % 2 == 0 {
            DispatchQueue.global().async { session.invalidateAndCancel() }
        } else {
            session.finishTasksAndInvalidate()
        }
        for task in swiftTasks { await task.value }
        asyncSession.finishTasksAndInvalidate()
        return 300
    }

    /// The path a task asks for and the body it must get: a stored one (6 in 10), a miss
    /// (2 in 10) or a bypass (2 in 10), the last two unique to the task.
    static func target(round: Int, index: Int, paths: [String], generator: inout SeededGenerator) -> (path: String, expected: Data) {
        switch Int.random(in: 0..<10, using: &generator) {
        case 0..<6:
            let path = paths.randomElement(using: &generator)!
            return (path, Data("body of \(path)".utf8))
        case 6..<8:
            let path = "/miss?r=\(round)&i=\(index)"
            return (path, Data(("miss \(path)" + filler).utf8))
        default:
            let path = "/bypass?r=\(round)&i=\(index)"
            return (path, Data(("bypass \(path)" + filler).utf8))
        }
    }

    /// data(for:) in a Swift task of its own, cancelled as it starts when `cancelFirst`:
    /// Foundation cancels the task it has just resumed, racing the cache's answer. (A Swift
    /// task cancelled while data(for:) awaits can deadlock Foundation 6.3.1 itself, with or
    /// without a cache: LinuxFoundationFactsTests.)
    static func fetch(_ request: URLRequest, on session: URLSession, cancelFirst: Bool, id: Int, expected: Data,
                      tally: Tally) -> Task<Void, Never> {
        Task {
            if cancelFirst { withUnsafeCurrentTask { $0?.cancel() } }
            do {
                let (data, _) = try await session.data(for: request)
                tally.end(id, error: nil, body: data, expected: expected)
            } catch {
                tally.end(id, error: error, body: nil, expected: expected)
            }
        }
    }

    private func end(_ task: URLSessionTask, _ ending: Ending, session: URLSession) {
        switch ending {
        case .none: break
        case .cancelAtOnce: task.cancel()
        case .cancelSoon: DispatchQueue.global().async { task.cancel() }
        case .cancelFromDelegateQueue: session.delegateQueue.addOperation { task.cancel() }
        }
    }
}

/// A protocol that starts and never answers: it keeps a task running while a test drives a
/// caching protocol of its own for that task.
final class SilentProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {}
    override func stopLoading() {}
}

/// A data task kept running by a silent protocol, and its work queue: a test drives a caching
/// protocol, or a `Delivery`, of its own for it. Invalidate `session` when done.
struct SilentTask: @unchecked Sendable {
    let session: URLSession
    let task: URLSessionDataTask
    let workQueue: DispatchQueue

    init(_ url: URL) throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [SilentProtocol.self]
        session = URLSession(configuration: configuration)
        task = session.dataTask(with: url)
        task.resume()
        let queue = TaskIntrospection.workQueue(of: task)
        if queue == nil { session.invalidateAndCancel() }
        workQueue = try #require(queue)
    }
}

/// A client that records every call made to it: its name, and what `entry` makes of it.
final class RecordingClient<Entry: Sendable>: NSObject, URLProtocolClient, @unchecked Sendable {
    let calls = Watched<[Entry]>([])
    private let entry: @Sendable (String) -> Entry

    init(_ entry: @escaping @Sendable (String) -> Entry) { self.entry = entry }

    private func record(_ name: String) {
        let made = entry(name)
        calls.update { $0.append(made) }
    }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) { record("redirect") }
    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) { record("cachedResponseIsValid") }
    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) { record("response") }
    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) { record("data") }
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) { record("finish") }
    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: Error) { record("fail") }
    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) { record("challenge") }
    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) { record("cancelChallenge") }
}

extension RecordingClient where Entry == String {
    /// Records the names alone.
    convenience init() { self.init { $0 } }
}

/// A client that records, for every call, whether it came while the task's session could not
/// run its own work (registry changes, cancel, stop): a block sent to the task's work queue
/// from inside the call must not run before the call returns.
func queueCheckingClient(workQueue: DispatchQueue) -> RecordingClient<(name: String, excludesSession: Bool)> {
    RecordingClient { name in
        let ran = DispatchSemaphore(value: 0)
        workQueue.async { ran.signal() }
        return (name, ran.wait(timeout: .now() + 0.05) == .timedOut)
    }
}

@Suite("Client calls exclude the session's own work")
struct WorkQueueDeliveryTests {
    @Test("every client call — a network answer, a hit from a store that needs I/O, a failure — is made while the session's work waits (on its shared work queue)",
          arguments: ["network", "hit", "failure"])
    func clientCallsOnWorkQueue(kind: String) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/q", response: .init(headers: [("Cache-Control", "max-age=600")], body: LoopbackOrigin.filler(count: 200_000)))
        let store = ioPathStore()
        let cache = HTTPCache(store: store)
        let recorder = EventRecorder(cache)
        let url = kind == "failure" ? URL(string: "http://127.0.0.1:1/refused")! : origin.url("/q")
        if kind == "hit" {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            let filling = URLSession(configuration: configuration)
            defer { filling.finishTasksAndInvalidate() }
            _ = try await fetch(filling, url)
        }
        let silent = try SilentTask(url)
        defer { silent.session.invalidateAndCancel() }
        let (task, queue) = (silent.task, silent.workQueue)
        let client = queueCheckingClient(workQueue: queue)
        let protocolClass = try #require(CachingURLProtocol.installation(for: cache).protocolClass as? CachingURLProtocol.Type)
        let caching = protocolClass.init(task: task, cachedResponse: nil, client: client)
        let box = UncheckedBox(caching)
        queue.async { box.value.startLoading() }
        #expect(await client.calls.wait { $0.contains { ["finish", "fail"].contains($0.name) } })
        let calls = client.calls.value
        #expect(calls.count >= (kind == "failure" ? 1 : 3), "\(calls.map(\.name))")
        let offQueue = calls.filter { !$0.excludesSession }.map(\.name)
        #expect(offQueue.isEmpty, "client calls made while the session could change its registry: \(offQueue)")
        queue.async { box.value.stopLoading() }
        // The class `installation(for:)` made lives as long as the process, and with it this
        // cache: its entry removed once stored, so nothing of this test outlives it.
        if kind != "failure" { #expect(await recorder.wait(for: .stored)) }
        try cache.removeAll()
    }
}
