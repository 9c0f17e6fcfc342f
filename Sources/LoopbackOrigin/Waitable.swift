import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value under a lock that async callers can wait on, without blocking a thread and without
/// sleeping: each waiter is resumed by the update that makes its predicate true, or by its
/// timeout.
final class Waitable<State: Sendable>: @unchecked Sendable {
    private typealias Waiter = (predicate: @Sendable (State) -> Bool, continuation: CheckedContinuation<Bool, Never>)

    private let lock = NSLock()
    private var state: State
    private var waiters: [Int: Waiter] = [:]
    private var nextID = 0

    init(_ state: State) { self.state = state }

    /// Reads the state under the lock.
    func read<T>(_ body: (State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(state)
    }

    /// Changes the state under the lock, then resumes every waiter it satisfies.
    @discardableResult
    func update<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        let result = body(&state)
        let ready = waiters.filter { $0.value.predicate(state) }
        for id in ready.keys { waiters[id] = nil }
        lock.unlock()
        for waiter in ready.values { waiter.continuation.resume(returning: true) }
        return result
    }

    /// Waits until `predicate` holds.
    /// - Returns: false if `timeout` seconds passed first.
    @discardableResult
    func wait(timeout: TimeInterval, until predicate: @escaping @Sendable (State) -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            lock.lock()
            if predicate(state) {
                lock.unlock()
                continuation.resume(returning: true)
                return
            }
            nextID += 1
            let id = nextID
            waiters[id] = (predicate, continuation)
            lock.unlock()
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0, timeout)) { [weak self] in
                guard let self else { return }
                self.lock.lock()
                let waiter = self.waiters.removeValue(forKey: id)
                self.lock.unlock()
                waiter?.continuation.resume(returning: false)
            }
        }
    }
}

/// A pipe used to wake a connection thread that waits in `poll`: `signal()` makes the read end
/// readable; `drain()` empties it again. Once `latch()`ed it stays readable for good.
final class WakePipe: @unchecked Sendable {
    /// The end a connection thread polls.
    let readEnd: Int32
    private let writeEnd: Int32

    /// Opens the pipe, both ends close-on-exec and non-blocking.
    init() {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) != 0 { fds = [-1, -1] }
        for fd in fds where fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        readEnd = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        if readEnd >= 0 { close(readEnd) }
        if writeEnd >= 0 { close(writeEnd) }
    }

    /// Makes the read end readable (a full pipe is already readable, so a failed write is fine).
    func signal() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the read end, so the next `poll` waits for the next `signal()`.
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while buffer.withUnsafeMutableBytes({ read(readEnd, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// Waits in `poll` until one of the descriptors is ready or `timeout` seconds pass (nil: no
/// limit), retrying on EINTR.
/// - Returns: the descriptors' `revents`, in order; all zero on timeout.
func pollReady(_ requests: [(fd: Int32, events: Int32)], timeout: TimeInterval?) -> [Int32] {
    var fds = requests.map { pollfd(fd: $0.fd, events: Int16(truncatingIfNeeded: $0.events), revents: 0) }
    let deadline = timeout.map { Date(timeIntervalSinceNow: $0) }
    while true {
        let milliseconds: Int32
        if let deadline {
            let remaining = deadline.timeIntervalSinceNow
            milliseconds = remaining <= 0 ? 0 : Int32(min(remaining * 1000 + 1, 3_600_000))
        } else {
            milliseconds = -1
        }
        let ready = poll(&fds, nfds_t(fds.count), milliseconds)
        if ready < 0 && errno == EINTR { continue }
        return fds.map { Int32($0.revents) }
    }
}
