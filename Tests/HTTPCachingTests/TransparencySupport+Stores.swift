import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

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
