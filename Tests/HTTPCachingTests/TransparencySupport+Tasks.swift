import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

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

    /// A session on this harness's cache (`caching`), or a plain one to compare with, with
    /// `delegate` (none for nil).
    func session(caching: Bool, _ delegate: ProbeDelegate? = nil,
                 configure: (URLSessionConfiguration) -> Void = { _ in }) -> URLSession {
        caching ? delegateSession(delegate, configure: configure) : uncachedSession(delegate, configure: configure)
    }

    /// What `observe` records on a plain session, then on a caching one on this harness's cache,
    /// each made with `configure` and invalidated after: one scenario both ways, to compare.
    func sideBySide(configure: (URLSessionConfiguration) -> Void = { _ in },
                    _ observe: (URLSession) async throws -> [String]) async throws -> [Bool: [String]] {
        var seen: [Bool: [String]] = [:]
        for caching in [false, true] {
            let session = session(caching: caching, configure: configure)
            defer { session.finishTasksAndInvalidate() }
            seen[caching] = try await observe(session)
        }
        return seen
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
