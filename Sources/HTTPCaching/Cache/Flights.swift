import Foundation
import Synchronization

/// Requests in flight per key, so concurrent misses for one key send one request: the first
/// leads, the others wait for its answer.
final class Flights: Sendable {
    enum Role { case leader, follower }

    private let waiting = Mutex<[CacheKey: [UncheckedBox<Exchange>]]>([:])
    /// Those waiting for a flight to reach a number of followers (`followers(of:until:timeout:)`),
    /// and how many there are, read without the lock: a miss pays nothing when none wait.
    private let watches = Mutex<[Watch]>([])
    private let watchCount = Atomic<Int>(0)

    private struct Watch {
        let key: CacheKey
        let holds: @Sendable (Int) -> Bool
        let answer: OnceAnswer
    }

    /// Joins the flight for a key: the first to join leads it.
    func join(_ key: CacheKey, _ exchange: Exchange) -> Role {
        let role = waiting.withLock { waiting -> Role in
            if waiting[key] != nil {
                waiting[key]!.append(UncheckedBox(exchange))
                return .follower
            }
            waiting[key] = []
            return .leader
        }
        changed(key)
        return role
    }

    /// How many requests wait on the flight for a key.
    func followers(of key: CacheKey) -> Int {
        waiting.withLock { $0[key]?.count ?? 0 }
    }

    /// A follower no longer waits (its caller went away).
    func leave(_ key: CacheKey, _ exchange: Exchange) {
        waiting.withLock { waiting in
            waiting[key]?.removeAll { $0.value === exchange }
        }
        changed(key)
    }

    /// The leader is done: each follower gets what it stored (nil if nothing), or reads the
    /// store (`readStore`: the leader wrote the body there, not to memory).
    func end(_ key: CacheKey, entry: CacheEntry?, readStore: Bool = false) {
        let followers = waiting.withLock { $0.removeValue(forKey: key) } ?? []
        changed(key)
        for follower in followers { follower.value.collapsedResult(entry, readStore: readStore) }
    }

    /// Waits until the number of requests waiting on `key`'s flight satisfies `holds`, checked
    /// now and at every join, leave and end; false after `timeout` seconds. For tests, which
    /// wait on what happens rather than poll.
    func followers(of key: CacheKey, until holds: @escaping @Sendable (Int) -> Bool, timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = OnceAnswer(continuation)
            watches.withLock { watches in
                watches.append(Watch(key: key, holds: holds, answer: answer))
                watchCount.store(watches.count, ordering: .sequentiallyConsistent)
            }
            changed(key)
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [weak self] in
                self?.watches.withLock { watches in
                    watches.removeAll { $0.answer === answer }
                    self?.watchCount.store(watches.count, ordering: .sequentiallyConsistent)
                }
                answer.give(false)
            }
        }
    }

    /// Answers the watches on `key` whose condition now holds.
    private func changed(_ key: CacheKey) {
        guard watchCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let met = watches.withLock { watches -> [Watch] in
            guard watches.contains(where: { $0.key == key }) else { return [] }
            let count = followers(of: key)
            let met = watches.filter { $0.key == key && $0.holds(count) }
            watches.removeAll { watch in met.contains { $0.answer === watch.answer } }
            watchCount.store(watches.count, ordering: .sequentiallyConsistent)
            return met
        }
        for watch in met { watch.answer.give(true) }
    }
}
