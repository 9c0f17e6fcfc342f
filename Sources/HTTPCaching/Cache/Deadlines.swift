import Foundation
import Synchronization

/// Where the cache's own timeouts are scheduled (a request waiting on another's answer,
/// `Exchange.timeOutWaiting`): on the queue's clock, or, once a test calls `holdForTests`,
/// held until the test runs them, so it moves time rather than waits for it.
final class Deadlines: Sendable {
    /// A deadline held for a test: its delay in seconds and its work.
    struct Held: Sendable {
        let seconds: TimeInterval
        let work: @Sendable () -> Void
    }

    private struct Holding {
        var held: [Held] = []
        var total = 0
        var watches: [(total: Int, answer: OnceAnswer)] = []
    }

    /// Nil until a test holds deadlines.
    private let holding = Mutex<Holding?>(nil)

    /// Runs `work` on `queue` after `seconds`, or holds it for the test that asked.
    func after(_ seconds: TimeInterval, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) {
        let met = holding.withLock { holding -> [OnceAnswer]? in
            guard holding != nil else { return nil }
            holding!.held.append(Held(seconds: seconds, work: work))
            holding!.total += 1
            let total = holding!.total
            defer { holding!.watches.removeAll { $0.total <= total } }
            return holding!.watches.filter { $0.total <= total }.map(\.answer)
        }
        guard let met else { return queue.asyncAfter(deadline: .now() + seconds, execute: work) }
        for answer in met { answer.give(true) }
    }

    /// From now on deadlines wait for `takeHeld`, for tests.
    func holdForTests() {
        holding.withLock { if $0 == nil { $0 = Holding() } }
    }

    /// Waits until `total` deadlines have been held since `holdForTests`; false after
    /// `timeout` seconds.
    func held(total: Int, timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = OnceAnswer(continuation)
            let reached = holding.withLock { holding -> Bool in
                guard (holding?.total ?? 0) < total else { return true }
                holding?.watches.append((total, answer))
                return false
            }
            if reached { return answer.give(true) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                self?.holding.withLock { $0?.watches.removeAll { $0.answer === answer } }
                answer.give(false)
            }
        }
    }

    /// The deadlines held and not yet taken that `matching` accepts (all, by default), in the
    /// order they were set; the test runs them. The others stay held.
    func takeHeld(matching: (Held) -> Bool = { _ in true }) -> [Held] {
        holding.withLock { holding in
            let taken = holding?.held.filter(matching) ?? []
            holding?.held.removeAll(where: matching)
            return taken
        }
    }
}

/// A continuation resumed once, by whichever comes first.
final class OnceAnswer: Sendable {
    private let continuation: Mutex<CheckedContinuation<Bool, Never>?>
    init(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation = Mutex(continuation) }
    func give(_ value: Bool) { continuation.withLock { $0.take() }?.resume(returning: value) }
}
