import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Testing
import LoopbackOrigin

/// A completion-handler task on `session`: its body as text and its response.
func fetchPlain(_ session: URLSession, _ url: URL) async throws -> (String, HTTPURLResponse) {
    try await withCheckedThrowingContinuation { continuation in
        session.dataTask(with: url) { data, response, error in
            if let error { continuation.resume(throwing: error); return }
            continuation.resume(returning: (String(decoding: data ?? Data(), as: UTF8.self), response as! HTTPURLResponse))
        }.resume()
    }
}

/// Records what a plain URLSession task's delegate sees, in order, and lets a test wait until
/// a given moment, so tests prove ordering by ordering, never by timers.
final class TaskRecorder: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Event: Sendable {
        case response(HTTPURLResponse)
        case data(Data)
        case redirect(HTTPURLResponse)
        case challenge(String)
        /// The task ended; the error's code, nil on success.
        case completed(Int?)
    }

    private let log = Watched<[Event]>([])
    /// Whether redirects are followed (else the 3xx is the task's response).
    let followRedirects: Bool
    /// The credential given to an authentication challenge; nil cancels the challenge.
    let credential: URLCredential?

    init(followRedirects: Bool = true, credential: URLCredential? = nil) {
        self.followRedirects = followRedirects
        self.credential = credential
    }

    var events: [Event] { log.value }
    var response: HTTPURLResponse? {
        events.lazy.compactMap { if case .response(let response) = $0 { response } else { nil } }.first
    }
    var body: Data { events.reduce(into: Data()) { if case .data(let data) = $1 { $0.append(data) } } }
    var text: String { String(decoding: body, as: UTF8.self) }
    var completion: Int?? {
        events.lazy.compactMap { if case .completed(let code) = $0 { code } else { nil } }.first
    }
    var sawResponse: Bool { response != nil }
    var dataEvents: Int { events.filter { if case .data = $0 { true } else { false } }.count }

    private func record(_ event: Event) {
        log.update { $0.append(event) }
    }

    /// Waits until `predicate` holds for the events so far; false after `timeout` seconds.
    func wait(timeout: TimeInterval = 10, until predicate: @escaping @Sendable ([Event]) -> Bool) async -> Bool {
        await log.wait(timeout: timeout, until: predicate)
    }

    func waitForResponse() async -> Bool {
        await wait { $0.contains { if case .response = $0 { true } else { false } } }
    }

    func waitForBody(containing text: String) async -> Bool {
        await wait { events in
            let body = events.reduce(into: Data()) { if case .data(let data) = $1 { $0.append(data) } }
            return String(decoding: body, as: UTF8.self).contains(text)
        }
    }

    func waitForCompletion() async -> Bool {
        await wait { $0.contains { if case .completed = $0 { true } else { false } } }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let http = response as? HTTPURLResponse { record(.response(http)) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        record(.data(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        record(.redirect(response))
        completionHandler(followRedirects ? request : nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        record(.challenge(challenge.protectionSpace.authenticationMethod))
        if let credential { completionHandler(.useCredential, credential) } else { completionHandler(.cancelAuthenticationChallenge, nil) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        record(.completed(error.map { ($0 as NSError).code }))
    }
}

/// A plain session (no cache) whose single delegate is `recorder`, and a task on it, started.
func startTask(_ url: URL, recorder: TaskRecorder, headers: [String: String] = [:]) -> URLSession {
    let session = URLSession(configuration: .ephemeral, delegate: recorder, delegateQueue: nil)
    var request = URLRequest(url: url)
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    session.dataTask(with: request).resume()
    return session
}
