import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one path from a loading protocol to its client, closed for good by the first finish,
/// failure or stop.
///
/// On Linux any client call after the task has ended traps (the session looks the task up in
/// its registry), so every call is made under the lock that `stop()` takes, and only while
/// the task is still running: a task can end without `stopLoading` reaching this object (its
/// `cancel()` runs `stopLoading` later, on the task's queue), so the task's own state is
/// checked too. Client calls only enqueue work (they never wait for the session's queue), so
/// holding the lock is safe.
final class Delivery: Sendable {
    private struct Target: @unchecked Sendable {
        let urlProtocol: URLProtocol
        let client: any URLProtocolClient
        let task: URLSessionTask?
        var responded = false
    }

    private let target: Mutex<Target?>

    init(protocol urlProtocol: URLProtocol, client: (any URLProtocolClient)?) {
        target = Mutex(client.map { Target(urlProtocol: urlProtocol, client: $0, task: urlProtocol.task) })
    }

    /// Whether the client can still be called.
    var isOpen: Bool { target.withLock { $0 != nil } }

    /// Whether the response head has gone out.
    var hasResponded: Bool { target.withLock { $0?.responded ?? true } }

    /// Sends the response head.
    func respond(_ response: URLResponse) {
        target.withLock { target in
            guard let current = Self.live(&target) else { return }
            current.client.urlProtocol(current.urlProtocol, didReceive: response, cacheStoragePolicy: .notAllowed)
            target?.responded = true
        }
    }

    /// Sends body bytes.
    func load(_ data: Data) {
        guard !data.isEmpty else { return }
        target.withLock { target in
            guard let current = Self.live(&target) else { return }
            current.client.urlProtocol(current.urlProtocol, didLoad: data)
        }
    }

    /// Ends the response, and the path.
    func finish() {
        target.withLock { target in
            guard let current = Self.live(&target) else { return }
            target = nil
            current.client.urlProtocolDidFinishLoading(current.urlProtocol)
        }
    }

    /// A whole response in one go: head, the body in one call (several `didLoad` calls lose
    /// data for completion-handler callers on Linux), finish.
    func deliver(_ response: URLResponse, body: Data) {
        target.withLock { target in
            guard let current = Self.live(&target) else { return }
            target = nil
            current.client.urlProtocol(current.urlProtocol, didReceive: response, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { current.client.urlProtocol(current.urlProtocol, didLoad: body) }
            current.client.urlProtocolDidFinishLoading(current.urlProtocol)
        }
    }

    /// Fails the task, and closes the path.
    func fail(_ error: any Error) {
        target.withLock { target in
            guard let current = Self.live(&target) else { return }
            target = nil
            current.client.urlProtocol(current.urlProtocol, didFailWithError: error)
        }
    }

    /// Closes the path: nothing reaches the client any more.
    func stop() {
        target.withLock { $0 = nil }
    }

    /// The target, if its task is still running; else closes the path.
    private static func live(_ target: inout Target?) -> Target? {
        guard let current = target else { return nil }
        if let task = current.task, task.state != .running {
            target = nil
            return nil
        }
        return current
    }
}
