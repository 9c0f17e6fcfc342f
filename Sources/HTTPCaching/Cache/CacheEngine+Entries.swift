import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Lookups and writes: an entry under its URL, and under its variant when it has a `Vary`;
/// the entry under the URL lists the variants (the variant index), oldest first.
extension CacheEngine {
    /// What a lookup that may not block found.
    enum ImmediateAnswer {
        case answered(entry: CacheEntry?, otherVariant: Bool)
        case needsIO
    }

    /// Looks an entry up without blocking, when the store can answer from memory: under the
    /// key, else through the configs its URL's `No-Vary-Search` index lists.
    func lookupImmediately(_ key: CacheKey, headers: RequestHeaders) -> ImmediateAnswer {
        if KeyedBodyPurges.concerns(key), keyedBodyPurges.withLock({ $0.mayRemove(key) }) { return .needsIO }
        let exact = lookupExactImmediately(key, headers: headers)
        guard case .answered(nil, _) = exact, usesNoVarySearch(key) else { return exact }
        return lookupThroughNoVarySearchImmediately(key, headers: headers) ?? exact
    }

    /// Looks the entry under a key (or its `Vary` variant) up without blocking.
    func lookupExactImmediately(_ key: CacheKey, headers: RequestHeaders) -> ImmediateAnswer {
        switch store.immediateEntry(for: key) {
        case .needsIO:
            return .needsIO
        case .absent:
            return .answered(entry: nil, otherVariant: false)
        case .found(let primary):
            if Vary.matches(primary, headers) { return .answered(entry: primary, otherVariant: false) }
            let names = Vary.names(primary.header("Vary"))
            if names.contains("*") { return .answered(entry: nil, otherVariant: true) }
            var variantKey = key
            variantKey.variant = Vary.variantName(names: names, headers: headers)
            switch store.immediateEntry(for: variantKey) {
            case .needsIO: return .needsIO
            case .absent: return .answered(entry: nil, otherVariant: true)
            case .found(let variant):
                return Vary.matches(variant, headers) ? .answered(entry: variant, otherVariant: false)
                                                      : .answered(entry: nil, otherVariant: true)
            }
        }
    }

    /// Looks an entry up, reading the store: under the key (`lookupExact`), else through the
    /// configs its URL's `No-Vary-Search` index lists (`lookupThroughNoVarySearch`). A keyed
    /// body stored before its URL was invalidated is a miss, and removed unless `changing` is
    /// false (`explain`).
    /// - Returns: the entry, and whether something is stored under the URL for other `Vary`
    ///   values (nil when the store could not be read, so the cache cannot tell).
    func lookup(_ key: CacheKey, headers: RequestHeaders, changing: Bool = true) -> (entry: CacheEntry?, otherVariant: Bool?) {
        if KeyedBodyPurges.concerns(key),
           keyedBodyPurges.withLock({ changing ? $0.takeRemoval(of: key) : $0.mayRemove(key) }) {
            // A keyed body stored before its URL was invalidated: a miss, and removed (the
            // variant found, and the entry under the key) unless only explaining.
            guard changing else { return (nil, false) }
            let found = lookupExact(key, headers: headers).entry
            if let found, found.key != key.primary { remove(found.key, url: found.url) }
            remove(key.primary, url: URL(string: key.url))
            return (nil, false)
        }
        let exact = lookupExact(key, headers: headers)
        guard exact.entry == nil, usesNoVarySearch(key) else { return exact }
        guard let entry = lookupThroughNoVarySearch(key, headers: headers) else { return exact }
        return (entry, false)
    }

    /// Looks the entry under a key up, reading the store: the entry under the URL if its
    /// `Vary` matches, else the variant the request's values name.
    /// - Returns: as `lookup`.
    func lookupExact(_ key: CacheKey, headers: RequestHeaders) -> (entry: CacheEntry?, otherVariant: Bool?) {
        let (primary, failed) = readReporting(key)
        guard let primary else { return (nil, failed ? nil : false) }
        if Vary.matches(primary, headers) { return (primary, false) }
        let names = Vary.names(primary.header("Vary"))
        if names.contains("*") { return (nil, true) }
        var variantKey = key
        variantKey.variant = Vary.variantName(names: names, headers: headers)
        let (variant, variantFailed) = readReporting(variantKey)
        guard let variant, Vary.matches(variant, headers) else { return (nil, variantFailed ? nil : true) }
        return (variant, false)
    }

    /// Reads the store; a failing read is reported and treated as a miss.
    func read(_ key: CacheKey) -> CacheEntry? {
        readReporting(key).entry
    }

    /// Reads the store, saying whether the read failed (damaged entry, store error), which is
    /// reported and treated as a miss.
    private func readReporting(_ key: CacheKey) -> (entry: CacheEntry?, failed: Bool) {
        do {
            return (try store.entry(for: key), false)
        } catch let error as HTTPCachingError where error.code == .corruptEntry {
            let reason = error.detail ?? error.description
            emit(.corrupted(reason: reason), key, URL(string: key.url))
            return (nil, true)
        } catch {
            emit(.storeFailed(reason: "read: \(error)"), key, URL(string: key.url))
            return (nil, true)
        }
    }

    /// Writes an entry, reporting `stored`, evictions and failures; false if not stored.
    @discardableResult
    func write(_ entry: CacheEntry) -> Bool {
        (try? write(entry, reporting: false)) ?? false
    }

    /// Writes an entry to the store's memory only (a delegate's `.allowedInMemoryOnly`),
    /// reporting as `write`; a store that keeps nothing in memory stores nothing
    /// (`notStored(.memoryOnly)`).
    @discardableResult
    func writeInMemory(_ entry: CacheEntry) -> Bool {
        (try? write(entry, reporting: false, inMemoryOnly: true)) ?? false
    }

    func write(_ entry: CacheEntry, reporting: Bool, inMemoryOnly: Bool = false) throws -> Bool {
        let listing = self.listing(entry)
        let result: StoreWriteResult
        do {
            if inMemoryOnly {
                guard let written = try store.writeInMemory(entry) else {
                    emit(.notStored(.memoryOnly), entry.key, entry.url)
                    return false
                }
                result = written
            } else {
                result = try store.write(entry)
            }
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), entry.key, entry.url)
            if reporting { throw error }
            return false
        }
        report(result, for: [entry], listing: listing, bytes: entry.byteCount)
        return result.stored
    }

    /// Reports what a write did: evictions, then `stored` for each entry (and the variant
    /// index updated), or `notStored` with the store's reason (`tooLarge` if it gives none).
    func report(_ result: StoreWriteResult, for entries: [CacheEntry], listing: (index: CacheEntry, dropped: [CacheKey])?,
                bytes: Int) {
        for evicted in result.evicted { emit(.evicted, evicted, URL(string: evicted.url)) }
        guard result.stored else {
            let reason = result.notStoredReason ?? .tooLarge(bytes: bytes, limit: store.maxEntrySize)
            for entry in entries { emit(.notStored(reason), entry.key, entry.url) }
            return
        }
        for entry in entries { emit(.stored, entry.key, entry.url) }
        if let listing { commitListing(listing) }
        listNoVarySearch(of: entries)
    }

    /// Invalidates what is stored for a URL (RFC 9111 section 4.4): the entry under its key,
    /// every variant the index lists and the one `headers` select, and what is stored for it
    /// under each `No-Vary-Search` config its URL's index lists, then reports `invalidated`.
    /// What is stored for it under a keyed body goes at its next lookup in this process
    /// (`KeyedBodyPurges`).
    func invalidate(_ key: CacheKey, headers: RequestHeaders, url: URL?) {
        keyedBodyPurges.withLock { $0.invalidate(key) }
        let keys = storedKeys(for: key, headers: headers) + noVarySearchKeys(for: key, headers: headers)
        for stored in keys { remove(stored, url: url) }
        emit(.invalidated, key.primary, url)
    }
}
