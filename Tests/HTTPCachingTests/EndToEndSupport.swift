import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin

/// Collects a delegate-based data task's chunks.
final class DelegateCollector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var response: URLResponse?
    private var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
    private var outcome: Result<(Data, URLResponse), any Error>?

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        lock.withLock { self.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { self.data.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let result: Result<(Data, URLResponse), any Error> = lock.withLock {
            if let error { return .failure(error) }
            guard let response else { return .failure(URLError(.badServerResponse)) }
            return .success((data, response))
        }
        let waiting = lock.withLock { () -> CheckedContinuation<(Data, URLResponse), any Error>? in
            outcome = result
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(with: result)
    }

    func result() async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            let ready = lock.withLock { () -> Result<(Data, URLResponse), any Error>? in
                if outcome == nil { self.continuation = continuation }
                return outcome
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// Requests an origin handler saw, for checking what was forwarded.
final class SeenHeaders: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [LoopbackOrigin.Request] = []

    func record(_ request: LoopbackOrigin.Request) { lock.withLock { requests.append(request) } }
    var all: [LoopbackOrigin.Request] { lock.withLock { requests } }
}
