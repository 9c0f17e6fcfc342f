import Synchronization

/// Requests in flight per key, so concurrent misses for one key send one request: the first
/// leads, the others wait for its answer.
final class Flights: Sendable {
    enum Role { case leader, follower }

    private let waiting = Mutex<[CacheKey: [UncheckedBox<Exchange>]]>([:])

    /// Joins the flight for a key: the first to join leads it.
    func join(_ key: CacheKey, _ exchange: Exchange) -> Role {
        waiting.withLock { waiting in
            if waiting[key] != nil {
                waiting[key]!.append(UncheckedBox(exchange))
                return .follower
            }
            waiting[key] = []
            return .leader
        }
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
    }

    /// The leader is done: each follower gets what it stored (nil if nothing), or reads the
    /// store (`readStore`: the leader wrote the body there, not to memory).
    func end(_ key: CacheKey, entry: CacheEntry?, readStore: Bool = false) {
        let followers = waiting.withLock { $0.removeValue(forKey: key) } ?? []
        for follower in followers { follower.value.collapsedResult(entry, readStore: readStore) }
    }
}
