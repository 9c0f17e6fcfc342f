import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// A clock tests move by hand, so no test sleeps across a window.
final class TestClock: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_700_000_000))

    var now: Date { date.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }

    var closure: @Sendable () -> Date { { self.now } }
}

/// Records a cache's events and lets a test wait for one, with a timeout, without sleeping.
final class EventRecorder: Sendable {
    private let log = Watched<[CacheEvent]>([])
    private let observation: CacheObservation

    init(_ cache: HTTPCache) {
        let log = self.log
        observation = cache.observe { event in log.update { $0.append(event) } }
    }

    deinit { observation.cancel() }

    var events: [CacheEvent] { log.value }
    var kinds: [CacheEvent.Kind] { events.map(\.kind) }

    func count(_ kind: CacheEvent.Kind) -> Int { kinds.filter { $0 == kind }.count }

    func count(where predicate: (CacheEvent.Kind) -> Bool) -> Int { kinds.filter(predicate).count }

    /// Waits until `predicate` holds for the events so far; false after `timeout` seconds.
    func wait(timeout: TimeInterval = 10, until predicate: @escaping ([CacheEvent]) -> Bool) async -> Bool {
        await log.wait(timeout: timeout, until: predicate)
    }

    /// Waits until `count` events of `kind` have been recorded.
    func wait(for kind: CacheEvent.Kind, count: Int = 1, timeout: TimeInterval = 10) async -> Bool {
        await wait(timeout: timeout) { events in events.filter { $0.kind == kind }.count >= count }
    }
}

struct FetchResult: Sendable {
    let data: Data
    let response: HTTPURLResponse

    var text: String { String(decoding: data, as: UTF8.self) }
    var status: CacheStatus? { response.cacheStatus }
}

/// A completion-handler data task, awaited.
func fetch(_ session: URLSession, _ request: URLRequest) async throws -> FetchResult {
    try await withCheckedThrowingContinuation { continuation in
        session.dataTask(with: request) { data, response, error in
            if let error {
                continuation.resume(throwing: error)
            } else if let http = response as? HTTPURLResponse {
                continuation.resume(returning: FetchResult(data: data ?? Data(), response: http))
            } else {
                continuation.resume(throwing: URLError(.badServerResponse))
            }
        }.resume()
    }
}

func fetch(_ session: URLSession, _ url: URL) async throws -> FetchResult {
    try await fetch(session, URLRequest(url: url))
}

/// An origin, a cache on a moved-by-hand clock, and a session with caching installed.
final class Harness: @unchecked Sendable {
    let origin: LoopbackOrigin
    let clock = TestClock()
    let cache: HTTPCache
    let session: URLSession
    let recorder: EventRecorder

    init(configuration: CacheConfiguration = CacheConfiguration(),
         store: any ResponseStore = MemoryResponseStore(),
         sessionConfiguration: URLSessionConfiguration = .ephemeral) throws {
        origin = try LoopbackOrigin()
        cache = HTTPCache(configuration: configuration, store: store, now: clock.closure)
        recorder = EventRecorder(cache)
        sessionConfiguration.enableHTTPCaching(cache)
        session = URLSession(configuration: sessionConfiguration)
    }

    deinit {
        session.finishTasksAndInvalidate()
        origin.stop()
    }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> FetchResult {
        var request = URLRequest(url: origin.url(path))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return try await fetch(session, request)
    }
}

extension HTTPCache {
    /// Management keyed as a session with no headers of its own keys requests: a fresh
    /// installation's (one request's entry is managed through an installation).
    var manage: CacheInstallation { URLSessionConfiguration.ephemeral.enableHTTPCaching(self) }
}

extension CacheWindows {
    /// Windows for tests, where the values are known to be valid.
    static func test(fresh: TimeInterval, usable: TimeInterval) -> CacheWindows {
        try! CacheWindows(fresh: fresh, usable: usable)
    }
}

/// A program this package builds (the demo, the test probes), found beside the test bundle.
func builtExecutable(named name: String) -> URL {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let beside = directory.appendingPathComponent(name)
    // The test bundle may sit one level inside the build folder.
    return FileManager.default.fileExists(atPath: beside.path)
        ? beside : directory.deletingLastPathComponent().appendingPathComponent(name)
}

/// Waits until `condition` holds, checking every 2 ms; false after `timeout` seconds. Only for
/// states no event in this process reports: a Redis server's or a failover's progress, what
/// a near cache learned from Redis, an object's deallocation. A flight's followers are
/// awaited on the flight itself (`Flights.followers(of:until:timeout:)`).
func eventually(timeout: TimeInterval = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 2_000_000)
    }
    return true
}

/// A request started at once from the calling task (no child task to schedule, so it goes out
/// even when the cooperative pool is busy), its answer awaited later.
final class StartedFetch: @unchecked Sendable {
    private let lock = NSLock()
    private var outcome: Result<FetchResult, any Error>?
    private var waiter: CheckedContinuation<FetchResult, any Error>?
    private var enders: [OnceAnswer] = []
    /// The task, for `cancel()` and the like.
    private(set) var task: URLSessionDataTask!

    init(_ session: URLSession, _ request: URLRequest) {
        let task = session.dataTask(with: request) { data, response, error in
            let outcome: Result<FetchResult, any Error>
            if let error {
                outcome = .failure(error)
            } else if let http = response as? HTTPURLResponse {
                outcome = .success(FetchResult(data: data ?? Data(), response: http))
            } else {
                outcome = .failure(URLError(.badServerResponse))
            }
            let (waiter, enders) = self.lock.withLock { () -> (CheckedContinuation<FetchResult, any Error>?, [OnceAnswer]) in
                self.outcome = outcome
                defer { (self.waiter, self.enders) = (nil, []) }
                return (self.waiter, self.enders)
            }
            waiter?.resume(with: outcome)
            for ender in enders { ender.give(true) }
        }
        self.task = task
        task.resume()
    }

    /// Whether it has ended, or ends within `timeout` seconds.
    func ends(within timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = OnceAnswer(continuation)
            let ended = lock.withLock { () -> Bool in
                if outcome == nil { enders.append(answer) }
                return outcome != nil
            }
            if ended { return answer.give(true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { answer.give(false) }
        }
    }

    var value: FetchResult {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let ready = lock.withLock { () -> Result<FetchResult, any Error>? in
                    if outcome == nil { waiter = continuation }
                    return outcome
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }
}
