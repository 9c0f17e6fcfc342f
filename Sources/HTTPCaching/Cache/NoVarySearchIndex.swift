import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `No-Vary-Search` index: which URL variation configs responses were stored under for a
/// URL without its query, newest first (at most `NoVarySearch.maxConfigsPerURL`). It is an
/// entry of its own (`NoVarySearch.indexKey(for:)`), as the variant index is, so every store
/// carries it and every process or host sharing the store reads the same one; it is read
/// from the store on every lookup that misses its exact key (one small read, on the miss path
/// only), never cached here, so a config another process stored is found. A lookup through
/// it costs one index read plus, per config listed, the lookup of one key and its `Vary`
/// variant: it never lists the store.
extension CacheEngine {
    /// Whether a key's lookups and invalidations go through the index.
    func usesNoVarySearch(_ key: CacheKey) -> Bool {
        configuration.honorsNoVarySearch && NoVarySearch.applies(to: key)
    }

    /// The configs listed for the URL of `key`, newest first. An index that does not parse is
    /// damaged: reported as `corrupted`, removed, and an empty list.
    func noVarySearchConfigs(for key: CacheKey) -> [NoVarySearch] {
        readNoVarySearchIndex(for: key)?.configs ?? []
    }

    /// The index for the URL of `key` and the configs it lists; nil when there is none, or
    /// when it does not parse (then reported as `corrupted` and removed).
    private func readNoVarySearchIndex(for key: CacheKey) -> (entry: CacheEntry, configs: [NoVarySearch])? {
        guard let indexKey = NoVarySearch.indexKey(for: key), let index = read(indexKey) else { return nil }
        guard let configs = NoVarySearch.configs(inIndexBody: index.body) else {
            emit(.corrupted(reason: "the No-Vary-Search index does not list configs"), indexKey, index.url)
            remove(indexKey, url: index.url)
            return nil
        }
        return (index, configs)
    }

    /// The entry a request keyed `key` finds through the configs listed for its URL: the first,
    /// newest config first, stored under its key for the request's URL, matching the request's
    /// `Vary`, whose own field parses to that config.
    func lookupThroughNoVarySearch(_ key: CacheKey, headers: RequestHeaders) -> CacheEntry? {
        for config in noVarySearchConfigs(for: key) {
            guard let storedKey = config.entryKey(for: key) else { continue }
            if let entry = lookupExact(storedKey, headers: headers).entry, NoVarySearch.declared(by: entry.header) == config {
                return entry
            }
        }
        return nil
    }

    /// `lookupThroughNoVarySearch` without blocking, when the store answers from memory;
    /// `.needsIO` when it cannot, or when the index does not parse (the lookup on the I/O
    /// queue then reports and removes it).
    func lookupThroughNoVarySearchImmediately(_ key: CacheKey, headers: RequestHeaders) -> ImmediateAnswer? {
        guard let indexKey = NoVarySearch.indexKey(for: key) else { return nil }
        let index: CacheEntry
        switch store.immediateEntry(for: indexKey) {
        case .needsIO: return .needsIO
        case .absent: return nil
        case .found(let found): index = found
        }
        guard let configs = NoVarySearch.configs(inIndexBody: index.body) else { return .needsIO }
        for config in configs {
            guard let storedKey = config.entryKey(for: key) else { continue }
            switch lookupExactImmediately(storedKey, headers: headers) {
            case .needsIO:
                return .needsIO
            case .answered(let entry?, _) where NoVarySearch.declared(by: entry.header) == config:
                return .answered(entry: entry, otherVariant: false)
            case .answered:
                continue
            }
        }
        return nil
    }

    /// After entries were stored: an entry stored under its `No-Vary-Search` lists its config
    /// first in its URL's index (the oldest past the limit falls off). The index outlives every
    /// entry stored through it (`indexEnd`: its `usefulUntil`, a Redis store's time to live).
    /// Nothing is written when the config is first already and the index outlives the entry,
    /// so a URL stored again and again writes its index about once per entry lifetime. A
    /// failed write is reported; the entry is then found only by requests for URLs whose index
    /// lists its config.
    func listNoVarySearch(of entries: [CacheEntry]) {
        guard let entry = entries.first(where: { $0.key.variant == nil }), NoVarySearch.isEntryKey(entry.key),
              let config = NoVarySearch.declared(by: entry.header), let indexKey = NoVarySearch.indexKey(for: entry.key) else { return }
        let existing = readNoVarySearchIndex(for: entry.key)
        var configs = existing?.configs ?? []
        if let existing, configs.first == config, Self.lasts(existing.entry.usefulUntil, through: entry.usefulUntil) { return }
        configs.removeAll { $0 == config }
        configs.insert(config, at: 0)
        let index = CacheEntry(key: indexKey, url: URL(string: indexKey.url) ?? entry.url, statusCode: 200, headers: [:],
                               body: NoVarySearch.indexBody(Array(configs.prefix(NoVarySearch.maxConfigsPerURL))),
                               storedAt: entry.storedAt, usefulUntil: Self.indexEnd(existing?.entry, storing: entry))
        do {
            try store.write(index)
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), indexKey, index.url)
        }
    }

    /// Whether something of use until `end` lasts through `other` (nil: no known end).
    private static func lasts(_ end: Date?, through other: Date?) -> Bool {
        guard let end else { return true }
        guard let other else { return false }
        return end >= other
    }

    /// The end of use of an index written for `entry`: none when the entry or the index has
    /// none, else the later of the index's and the entry's end plus its lifetime again (so the
    /// entries stored in the next lifetime need no rewrite).
    private static func indexEnd(_ index: CacheEntry?, storing entry: CacheEntry) -> Date? {
        guard let end = entry.usefulUntil, index == nil || index?.usefulUntil != nil else { return nil }
        let wanted = end.addingTimeInterval(max(0, end.timeIntervalSince(entry.storedAt)))
        return max(wanted, index?.usefulUntil ?? wanted)
    }

    /// The keys of what is stored for the URL of `key` through the configs its index lists:
    /// for each, the entry under the config's key for this URL and its `Vary` variants (one
    /// stored under another config for an equivalent URL too: removing more is safe).
    func noVarySearchKeys(for key: CacheKey, headers: RequestHeaders) -> [CacheKey] {
        guard usesNoVarySearch(key) else { return [] }
        return noVarySearchConfigs(for: key).compactMap { $0.entryKey(for: key) }
            .flatMap { storedKeys(for: $0, headers: headers) }
    }
}
