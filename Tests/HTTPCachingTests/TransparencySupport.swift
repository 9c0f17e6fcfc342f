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
        /// What had arrived (`order`) when each question came.
        var askedAfter: [[String]] = []
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
        state.update {
            $0.cacheQuestions.append(proposedResponse)
            $0.askedAfter.append($0.order)
        }
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
