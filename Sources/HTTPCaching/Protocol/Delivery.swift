import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one path from a loading protocol to its client, closed for good by the first
/// finish, failure or stop.
///
/// On Linux any client call after `stopLoading` traps, so every call is made under the lock
/// that `stop()` takes: once stopped, nothing reaches the client again. Client calls only
/// enqueue work (they never wait for the session's queue), so holding the lock is safe.
final class Delivery: @unchecked Sendable {
    private let lock = NSLock()
    private var target: (protocol: URLProtocol, client: any URLProtocolClient)?
    private var inner: URLSessionDataTask?

    init(protocol: URLProtocol, client: (any URLProtocolClient)?) {
        if let client { target = (`protocol`, client) }
    }

    /// Delivers a whole response: the response, the body in one call (several `didLoad`
    /// calls lose data for completion-handler callers on Linux), then finish.
    func deliver(_ response: URLResponse, body: Data) {
        lock.lock()
        defer { lock.unlock() }
        guard let (proto, client) = target else { return }
        target = nil
        inner = nil
        client.urlProtocol(proto, didReceive: response, cacheStoragePolicy: .notAllowed)
        if !body.isEmpty { client.urlProtocol(proto, didLoad: body) }
        client.urlProtocolDidFinishLoading(proto)
    }

    func fail(_ error: any Error) {
        lock.lock()
        defer { lock.unlock() }
        guard let (proto, client) = target else { return }
        target = nil
        inner = nil
        client.urlProtocol(proto, didFailWithError: error)
    }

    /// Records the forwarded task; false if the load already ended (cancel the task).
    func attach(_ task: URLSessionDataTask) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard target != nil else { return false }
        inner = task
        return true
    }

    /// Closes the path and cancels the forwarded task, off this queue (cancelling it
    /// synchronously inside `stopLoading` deadlocks on Linux).
    func stop() {
        lock.lock()
        target = nil
        let task = inner.map(UncheckedTask.init)
        inner = nil
        lock.unlock()
        if let task { DispatchQueue.global().async { task.value.cancel() } }
    }
}

private struct UncheckedTask: @unchecked Sendable {
    let value: URLSessionDataTask
}
