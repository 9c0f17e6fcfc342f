import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// A value under a lock that a test can wait on, with a timeout, without sleeping: each waiter
/// is resumed by the change that satisfies it, or by its timeout.
final class Watched<State: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var state: State
    private var waiters: [Int: (predicate: (State) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = [:]
    private var nextID = 0

    init(_ state: State) { self.state = state }

    var value: State { lock.withLock { state } }

    func update(_ body: (inout State) -> Void) {
        let ready: [CheckedContinuation<Bool, Never>] = lock.withLock {
            body(&state)
            let matched = waiters.filter { $0.value.predicate(state) }
            for id in matched.keys { waiters[id] = nil }
            return matched.map(\.value.continuation)
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// Waits until `predicate` holds; false after `timeout` seconds.
    func wait(timeout: TimeInterval = 10, until predicate: @escaping (State) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            let id: Int? = lock.withLock {
                if predicate(state) { return nil }
                nextID += 1
                waiters[nextID] = (predicate, continuation)
                return nextID
            }
            guard let id else { return continuation.resume(returning: true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                guard let self else { return }
                let waiter = self.lock.withLock { self.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: false)
            }
        }
    }
}

/// A session delegate that records everything a task reports, in order, and answers
/// redirects, challenges and body-stream requests as the test says.
final class ProbeDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    struct Redirect: @unchecked Sendable {
        let response: HTTPURLResponse
        let request: URLRequest
    }

    struct Challenge: @unchecked Sendable {
        let method: String
        let realm: String?
        let previousFailureCount: Int
        let proposedUser: String?
        let failureStatus: Int?
    }

    struct State: @unchecked Sendable {
        var response: HTTPURLResponse?
        var chunks: [Data] = []
        var completed = false
        var error: (any Error)?
        var redirects: [Redirect] = []
        var challenges: [Challenge] = []
        /// (bytesSent, totalBytesSent, totalBytesExpectedToSend) per call.
        var sent: [(Int64, Int64, Int64)] = []
        var bodyStreamRequests = 0
        /// The responses `willCacheResponse` was asked about (not in `order`: Foundation alone
        /// never asks on Linux).
        var cacheQuestions: [CachedURLResponse] = []
        /// Everything in the order it arrived: "response", "data", "complete", "redirect", "challenge".
        var order: [String] = []

        var data: Data { chunks.reduce(into: Data()) { $0.append($1) } }
        var byteCount: Int { chunks.reduce(0) { $0 + $1.count } }
        var errorCode: Int? { error.map { ($0 as NSError).code } }
    }

    let state = Watched(State())
    /// Answers a redirect; nil refuses it. The default follows it unchanged.
    let onRedirect: @Sendable (HTTPURLResponse, URLRequest) -> URLRequest?
    /// Answers a challenge. The default is the default handling.
    let onChallenge: @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?)
    /// Supplies an upload's body stream.
    let bodyStream: @Sendable () -> InputStream?
    /// Answers `willCacheResponse` (the default stores what is proposed), calling the handler
    /// itself: later, or never, if it likes.
    let onWillCache: @Sendable (CachedURLResponse, @escaping @Sendable (CachedURLResponse?) -> Void) -> Void
    /// Called after a response or a chunk is recorded, with the task (to cancel it there).
    let onEvent: @Sendable (String, URLSessionTask) -> Void

    init(onRedirect: @escaping @Sendable (HTTPURLResponse, URLRequest) -> URLRequest? = { _, request in request },
         onChallenge: @escaping @Sendable (URLAuthenticationChallenge) -> (URLSession.AuthChallengeDisposition, URLCredential?)
            = { _ in (.performDefaultHandling, nil) },
         bodyStream: @escaping @Sendable () -> InputStream? = { nil },
         onWillCache: @escaping @Sendable (CachedURLResponse, @escaping @Sendable (CachedURLResponse?) -> Void) -> Void
            = { proposed, answer in answer(proposed) },
         onEvent: @escaping @Sendable (String, URLSessionTask) -> Void = { _, _ in }) {
        self.onRedirect = onRedirect
        self.onChallenge = onChallenge
        self.bodyStream = bodyStream
        self.onWillCache = onWillCache
        self.onEvent = onEvent
    }

    var value: State { state.value }

    func wait(timeout: TimeInterval = 10, until predicate: @escaping (State) -> Bool) async -> Bool {
        await state.wait(timeout: timeout, until: predicate)
    }

    /// Waits for the end and returns what the task got.
    func finished(timeout: TimeInterval = 10) async -> State? {
        await wait(timeout: timeout) { $0.completed } ? value : nil
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        state.update {
            $0.response = response as? HTTPURLResponse
            $0.order.append("response")
        }
        onEvent("response", dataTask)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.update {
            $0.chunks.append(data)
            $0.order.append("data")
        }
        onEvent("data", dataTask)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse,
                    completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void) {
        state.update { $0.cacheQuestions.append(proposedResponse) }
        onWillCache(proposedResponse, completionHandler)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        state.update {
            $0.error = error
            $0.completed = true
            $0.order.append("complete")
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        state.update {
            $0.redirects.append(Redirect(response: response, request: request))
            $0.order.append("redirect")
        }
        completionHandler(onRedirect(response, request))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let space = challenge.protectionSpace
        state.update {
            $0.challenges.append(Challenge(method: space.authenticationMethod, realm: space.realm,
                                           previousFailureCount: challenge.previousFailureCount,
                                           proposedUser: challenge.proposedCredential?.user,
                                           failureStatus: (challenge.failureResponse as? HTTPURLResponse)?.statusCode))
            $0.order.append("challenge")
        }
        let (disposition, credential) = onChallenge(challenge)
        completionHandler(disposition, credential)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping (InputStream?) -> Void) {
        state.update { $0.bodyStreamRequests += 1 }
        completionHandler(bodyStream())
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                    totalBytesExpectedToSend: Int64) {
        state.update { $0.sent.append((bytesSent, totalBytesSent, totalBytesExpectedToSend)) }
    }
}

/// A caching session and, beside it, a plain one with the same settings and delegate kind,
/// so a test can show the cache behaves as Foundation does without it.
struct SessionPair {
    let caching: URLSession
    let plain: URLSession

    func invalidate() {
        caching.finishTasksAndInvalidate()
        plain.finishTasksAndInvalidate()
    }
}

extension Harness {
    /// A session on this harness's cache with a delegate (none for nil).
    func delegateSession(_ delegate: ProbeDelegate?, configure: (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configure(configuration)
        configuration.enableHTTPCaching(cache)
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// A session on this harness's cache without a delegate.
    func plainCachingSession(configure: (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configure(configuration)
        configuration.enableHTTPCaching(cache)
        return URLSession(configuration: configuration)
    }
}

/// A plain session (no cache) with the given delegate, for comparing with Foundation's own
/// behaviour.
func uncachedSession(_ delegate: ProbeDelegate? = nil, configure: (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configure(configuration)
    return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
}

/// A completion-handler task's answer, or its error, awaited with a bound: nil if it did not
/// end within `timeout` seconds (a hang).
func fetchOutcome(_ session: URLSession, _ request: URLRequest, timeout: TimeInterval = 10) async -> Result<FetchResult, any Error>? {
    let outcome = Watched<Result<FetchResult, any Error>?>(nil)
    let task = session.dataTask(with: request) { data, response, error in
        let result: Result<FetchResult, any Error>
        if let error {
            result = .failure(error)
        } else if let http = response as? HTTPURLResponse {
            result = .success(FetchResult(data: data ?? Data(), response: http))
        } else {
            result = .failure(URLError(.badServerResponse))
        }
        outcome.update { $0 = result }
    }
    task.resume()
    guard await outcome.wait(timeout: timeout, until: { $0 != nil }) else {
        task.cancel()
        return nil
    }
    return outcome.value
}

/// The code of an error (NSURLErrorCancelled, ...).
func errorCode(_ error: (any Error)?) -> Int? {
    error.map { ($0 as NSError).code }
}

extension Result where Success == FetchResult {
    var response: FetchResult? { try? get() }
    var failure: (any Error)? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// A process's resident memory in KB, from /proc/self/statm.
func residentKilobytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return -1 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return -1 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

/// The three ways existing code receives an answer.
enum TaskKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// `dataTask(with:)` on a session with a data delegate: chunks through the delegate.
    case delegate
    /// `dataTask(with:completionHandler:)` on a session that has a delegate (asked for
    /// redirects and challenges; its data goes to the completion handler).
    case completionHandler
    /// `data(for:)` on a session that has a delegate.
    case asyncData
    /// `data(for:delegate:)` on a session without a delegate, the probe as the task's delegate.
    /// Foundation 6.3.1 itself never asks such a delegate about redirects or challenges
    /// (`LinuxFoundationFactsTests`); the cache does, as Darwin does.
    case asyncTaskDelegate

    /// The kinds a plain session on Linux serves the same way.
    static let foundationKinds: [TaskKind] = [.delegate, .completionHandler, .asyncData]

    var testDescription: String { rawValue }
}

/// What a task ended with.
struct Outcome: @unchecked Sendable {
    var response: HTTPURLResponse?
    var data = Data()
    var error: (any Error)?

    var status: Int? { response?.statusCode }
    var text: String { String(decoding: data, as: UTF8.self) }
    var errorCode: Int? { error.map { ($0 as NSError).code } }
}

/// Runs one request the way `kind` says, on a session `makeSession` builds (given the delegate
/// it should have, nil for none); nil if it did not end within `timeout` seconds.
func perform(_ kind: TaskKind, _ request: URLRequest, probe: ProbeDelegate, timeout: TimeInterval = 10,
             makeSession: (ProbeDelegate?) -> URLSession) async -> Outcome? {
    switch kind {
    case .delegate:
        let session = makeSession(probe)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        task.resume()
        guard let state = await probe.finished(timeout: timeout) else {
            task.cancel()
            return nil
        }
        return Outcome(response: state.response, data: state.data, error: state.error)
    case .completionHandler:
        let session = makeSession(probe)
        defer { session.finishTasksAndInvalidate() }
        guard let result = await fetchOutcome(session, request, timeout: timeout) else { return nil }
        switch result {
        case .success(let fetched): return Outcome(response: fetched.response, data: fetched.data)
        case .failure(let error): return Outcome(error: error)
        }
    case .asyncData, .asyncTaskDelegate:
        let session = makeSession(kind == .asyncData ? probe : nil)
        defer { session.finishTasksAndInvalidate() }
        let outcome: Outcome
        do {
            let (data, response) = try await session.data(for: request, delegate: kind == .asyncData ? nil : probe)
            outcome = Outcome(response: response as? HTTPURLResponse, data: data)
        } catch {
            outcome = Outcome(error: error)
        }
        // data(for:) returns from the task's work queue while its delegate's calls may still
        // wait on the session's serial delegate queue (with or without the cache): let them run.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            session.delegateQueue.addOperation { done.resume() }
        }
        return outcome
    }
}

/// The credentials a storage holds for a protection space, compared by value (on Linux
/// `URLProtectionSpace` compares by identity).
func storedCredentials(_ storage: URLCredentialStorage, host: String, port: Int, realm: String?) -> [String: URLCredential] {
    var found: [String: URLCredential] = [:]
    for (space, credentials) in storage.allCredentials
    where space.host == host && space.port == port && space.realm == realm {
        found.merge(credentials) { first, _ in first }
    }
    return found
}

/// A store that keeps entries in memory but never answers without I/O, so every hit takes the
/// cache's I/O path and is answered from another thread; its `beforeWrite` can fail writes.
func ioPathStore() -> InstrumentedStore {
    InstrumentedStore(MemoryResponseStore())
}

/// What a failing write throws in these tests.
struct WriteFailed: Error, CustomStringConvertible {
    var description: String { "the disk is full" }
}

/// Holds a store's reads until the test lets them go, and says when one has started: a slow
/// disk or server, without a timer.
final class ReadGate: Sendable {
    private let gate = DispatchSemaphore(value: 0)
    private let started = Mutex<(count: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    /// A memory store whose every read waits at this gate, after reading.
    func store(_ inner: any ResponseStore = MemoryResponseStore()) -> InstrumentedStore {
        InstrumentedStore(inner, afterRead: { [self] _, _ in hold() })
    }

    /// Says a read has started, then waits until the gate opens.
    func hold() {
        let waiters = started.withLock { state in
            state.count += 1
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
        gate.wait()
        gate.signal()
    }

    /// Waits until a read has started (and is held).
    func readStarted() async {
        await withCheckedContinuation { continuation in
            let already = started.withLock { state -> Bool in
                if state.count > 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if already { continuation.resume() }
        }
    }

    /// Lets every read through, now and later.
    func open() { gate.signal() }
}
