import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The keyed-body index (`BodyKeying.indexKey(for:)`): an entry of its own, as the variant and
/// `No-Vary-Search` indexes are, so every store carries it and every process sharing the store
/// reads the same one. Written after a keyed body's entry is stored, and only when the body is
/// not listed already to an end that lasts through the entry's; read when its URL is
/// invalidated. Entries of one URL with different bodies are written on different I/O queues,
/// so one process updates an index under a lock of its own (`keyedBodyLock(for:)`).
extension CacheEngine {
    /// A lock serializing the updates of the indexes whose URL hashes to it.
    final class IndexLock: Sendable {
        let mutex = Mutex(())
    }

    /// The locks of the keyed-body indexes, shared by every cache of the process (two caches
    /// may share a store).
    static let keyedBodyLocks = (0..<16).map { _ in IndexLock() }

    /// The lock an index's updates take.
    static func keyedBodyLock(for index: CacheKey) -> IndexLock {
        var hasher = Hasher()
        hasher.combine(index)
        return keyedBodyLocks[Int(UInt(bitPattern: hasher.finalize()) % UInt(keyedBodyLocks.count))]
    }

    /// The lines of an index; nil when there is none, or when it does not parse (then
    /// reported as `corrupted` and removed).
    private func readKeyedBodyIndex(_ indexKey: CacheKey) -> [BodyKeying.IndexLine]? {
        guard let index = read(indexKey) else { return nil }
        guard let lines = BodyKeying.lines(inIndexBody: index.body) else {
            emit(.corrupted(reason: "the keyed-body index does not list bodies"), indexKey, index.url)
            remove(indexKey, url: index.url)
            return nil
        }
        return lines
    }

    /// After entries were stored: a keyed body's entry is listed last in its URL's index, the
    /// bodies past their end of use are left out, and the entries of the oldest past
    /// `BodyKeying.maxBodiesPerURL` are removed (reported `evicted`). A failed write is
    /// reported; the entry is then not invalidated through its URL.
    func listKeyedBody(of entries: [CacheEntry]) {
        guard let entry = entries.first, let indexKey = BodyKeying.indexKey(for: entry.key),
              let digest = BodyKeying.digest(in: entry.key) else { return }
        let ends = entries.map(\.usefulUntil)
        let end = ends.contains(nil) ? nil : ends.compactMap { $0 }.max()
        let line = BodyKeying.IndexLine(method: entry.key.method, digest: digest, usefulUntil: end)
        let dropped = Self.keyedBodyLock(for: indexKey).mutex.withLock { _ -> [BodyKeying.IndexLine] in
            guard let listing = BodyKeying.listing(line, in: readKeyedBodyIndex(indexKey) ?? [], now: now()) else { return [] }
            let index = CacheEntry(key: indexKey, url: entry.url, statusCode: 200, headers: [:],
                                   body: BodyKeying.indexBody(listing.lines), storedAt: entry.storedAt,
                                   usefulUntil: BodyKeying.indexEnd(listing.lines))
            do {
                try store.write(index)
            } catch {
                emit(.storeFailed(reason: "write: \(error)"), indexKey, entry.url)
                return []
            }
            return listing.dropped
        }
        for key in dropped.compactMap({ BodyKeying.entryKey(in: indexKey, line: $0) }) {
            for stored in keyedBodyKeys(of: key) { remove(stored, url: entry.url) }
            emit(.evicted, key, entry.url)
        }
    }

    /// The keys stored for the keyed bodies the index `indexKey` lists (each entry, its `Vary`
    /// variants and their index), and the index itself, which is removed here: a body listed
    /// while the entries are removed starts a new one.
    func keyedBodyKeys(listedIn indexKey: CacheKey) -> [CacheKey] {
        let lines = Self.keyedBodyLock(for: indexKey).mutex.withLock { _ -> [BodyKeying.IndexLine] in
            let lines = readKeyedBodyIndex(indexKey) ?? []
            if !lines.isEmpty { remove(indexKey, url: URL(string: indexKey.url)) }
            return lines
        }
        return lines.compactMap { BodyKeying.entryKey(in: indexKey, line: $0) }.flatMap(keyedBodyKeys(of:))
    }

    /// The keys of a keyed body's entry: it, the variants its variant index lists, the index.
    private func keyedBodyKeys(of key: CacheKey) -> [CacheKey] {
        let variants = variantNames(of: key).map { name -> CacheKey in
            var variant = key
            variant.variant = name
            return variant
        }
        return variants + [key, variantIndexKey(key)]
    }
}
