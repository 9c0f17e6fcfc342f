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

    /// Looks an entry up without blocking, when the store can answer from memory.
    func lookupImmediately(_ key: CacheKey, headers: RequestHeaders) -> ImmediateAnswer {
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

    /// Looks an entry up, reading the store: the entry under the URL if its `Vary` matches,
    /// else the variant the request's values name.
    /// - Returns: the entry, and whether something is stored under the URL for other `Vary`
    ///   values (nil when the store could not be read, so the cache cannot tell).
    func lookup(_ key: CacheKey, headers: RequestHeaders) -> (entry: CacheEntry?, otherVariant: Bool?) {
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
        } catch let ResponseStoreError.corruptEntry(_, reason) {
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
        var entry = entry
        let dropped = listVariants(of: &entry)
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
        report(result, for: [entry], dropping: dropped, bytes: entry.byteCount)
        return result.stored
    }

    /// Reports what a write did: evictions, then `stored` for each entry (and the variants
    /// that fell off its URL's list removed), or `notStored(.tooLarge)`.
    func report(_ result: StoreWriteResult, for entries: [CacheEntry], dropping dropped: [CacheKey], bytes: Int) {
        for evicted in result.evicted { emit(.evicted, evicted, URL(string: evicted.url)) }
        guard result.stored else {
            for entry in entries { emit(.notStored(.tooLarge(bytes: bytes, limit: store.maxEntrySize)), entry.key, entry.url) }
            return
        }
        for entry in entries { emit(.stored, entry.key, entry.url) }
        for variant in dropped {
            remove(variant, url: entries.last?.url)
            emit(.evicted, variant, entries.last?.url)
        }
    }

    /// Before an entry is written: under its URL, lists its variant (see `listVariants(in:)`);
    /// as a variant, lists none (only the entry under the URL lists them).
    func listVariants(of entry: inout CacheEntry) -> [CacheKey] {
        if entry.key.variant == nil { return listVariants(in: &entry) }
        entry.varyValues[Vary.variantListName] = nil
        return []
    }

    /// Before an entry is written under its URL: lists its variant after those already
    /// listed, and returns the keys of the variants that fall off the list (stored longest
    /// ago), to remove once the write succeeds.
    private func listVariants(in entry: inout CacheEntry) -> [CacheKey] {
        let names = Vary.names(entry.header("Vary")).filter { $0 != "*" }
        guard !names.isEmpty else {
            entry.varyValues[Vary.variantListName] = nil
            return []
        }
        let name = Vary.variantName(names: names, values: entry.varyValues)
        var list = read(entry.key).map(Vary.variantList(of:)) ?? []
        list.removeAll { $0 == name }
        list.append(name)
        var dropped: [CacheKey] = []
        while list.count > Vary.maxVariantsPerURL {
            var key = entry.key
            key.variant = list.removeFirst()
            dropped.append(key)
        }
        entry.varyValues[Vary.variantListName] = list.joined(separator: ",")
        return dropped
    }

    /// Invalidates what is stored for a URL (RFC 9111 section 4.4): the entry under its key
    /// and every variant it lists, plus the variant `headers` select, then reports
    /// `invalidated`.
    func invalidate(_ key: CacheKey, headers: RequestHeaders, url: URL?) {
        var keys: [CacheKey] = []
        if let primary = read(key.primary) {
            var names = Set(Vary.variantList(of: primary))
            let vary = Vary.names(primary.header("Vary")).filter { $0 != "*" }
            if !vary.isEmpty { names.insert(Vary.variantName(names: vary, headers: headers)) }
            for name in names.sorted() {
                var variant = key.primary
                variant.variant = name
                keys.append(variant)
            }
        }
        keys.append(key.primary)
        for key in keys { remove(key, url: url) }
        emit(.invalidated, key.primary, url)
    }
}
