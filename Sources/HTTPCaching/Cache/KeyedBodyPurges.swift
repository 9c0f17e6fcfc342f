import Foundation

/// The URLs an unsafe request invalidated in this process, for what is stored under them with
/// a keyed body (a QUERY's, a keyed POST's): nothing the URL leads to lists those entries, so
/// each is removed at its first lookup after the invalidation instead (RFC 9111 section 4.4),
/// once; what is stored after that lookup is served. Value-typed: keep it under a lock.
struct KeyedBodyPurges {
    /// Each invalidated URL (the key of its GET), with the keyed keys looked up since.
    private var invalidated = BoundedMap<CacheKey, Set<String>>(limit: 4_096)
    /// Keyed keys remembered per URL: past it they are forgotten, and each is removed once more
    /// at its next lookup (a miss more, never a stale answer).
    static let keysPerURL = 256

    /// Whether `key` may be a keyed body's: not a GET's (no body is keyed for GET or HEAD), so a
    /// GET's lookup asks nothing more, and takes no lock.
    static func concerns(_ key: CacheKey) -> Bool {
        key.method != "GET"
    }

    /// The key of the GET whose invalidation reaches a keyed body's key; nil for a key without
    /// a body.
    static func base(of key: CacheKey) -> CacheKey? {
        guard concerns(key), let marker = key.url.range(of: "#body=") else { return nil }
        let rest = key.url[marker.upperBound...]
        var base = key.primary
        base.method = "GET"
        base.url = String(key.url[..<marker.lowerBound]) + (rest.firstIndex(of: "#").map { String(rest[$0...]) } ?? "")
        return base
    }

    /// An unsafe request invalidated `key`'s URL (`key` is its GET's): every keyed body stored
    /// under it is removed at its next lookup.
    mutating func invalidate(_ key: CacheKey) {
        invalidated[key.primary] = []
    }

    /// Whether a lookup of `key` may have to remove what it finds (`takeRemoval(of:)`, which
    /// reads and writes the store: never on Foundation's queue).
    func mayRemove(_ key: CacheKey) -> Bool {
        guard invalidated.count > 0, let base = Self.base(of: key), let seen = invalidated[base] else { return false }
        return !seen.contains(key.primary.storageString)
    }

    /// Whether what is stored under `key` must be removed: true at its first lookup since its
    /// URL was invalidated, then false.
    mutating func takeRemoval(of key: CacheKey) -> Bool {
        guard invalidated.count > 0, let base = Self.base(of: key), var seen = invalidated[base] else { return false }
        let name = key.primary.storageString
        guard !seen.contains(name) else { return false }
        if seen.count >= Self.keysPerURL { seen = [] }
        seen.insert(name)
        invalidated[base] = seen
        return true
    }
}
