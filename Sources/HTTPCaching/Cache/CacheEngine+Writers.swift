import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Entries written as their body arrives: a store writer per answer, the body appended as it
/// streams, the entries (under the URL, and under its `Vary` variant) committed at the end.
extension CacheEngine {
    /// A writer for an answer about to be stored under `key`; nil (reported as `storeFailed`)
    /// when the store cannot begin one.
    func openWriter(for key: CacheKey, url: URL?) -> UncheckedBox<any ResponseStoreWriter>? {
        do {
            return UncheckedBox(try store.makeWriter(for: key))
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), key, url)
            return nil
        }
    }

    /// Appends a part of the body; false (reported, the writer aborted) when the store fails.
    func append(_ bytes: Data, to writer: any ResponseStoreWriter, key: CacheKey, url: URL?) -> Bool {
        do {
            try writer.append(bytes)
            return true
        } catch {
            writer.abort()
            emit(.storeFailed(reason: "write: \(error)"), key, url)
            return false
        }
    }

    /// Commits the entries with the body the writer holds (`bodyBytes` long), reporting as
    /// `write(_:)` does; in memory only when a delegate said so.
    /// - Returns: whether every entry was stored.
    func commit(_ writer: any ResponseStoreWriter, _ entries: [CacheEntry], bodyBytes: Int, inMemoryOnly: Bool) -> Bool {
        guard let first = entries.first else { return false }
        if inMemoryOnly {
            defer { writer.abort() }
            guard let body = try? writer.body else { return false }
            return entries.map { entry -> Bool in
                var whole = entry
                whole.body = body
                return writeInMemory(whole)
            }.allSatisfy { $0 }
        }
        let listing = entries.lazy.compactMap { self.listing($0) }.first
        let result: StoreWriteResult
        do {
            result = try writer.commit(entries)
        } catch {
            writer.abort()
            emit(.storeFailed(reason: "write: \(error)"), first.key, first.url)
            return false
        }
        report(result, for: entries, listing: listing, bytes: first.byteCount + bodyBytes)
        return result.stored
    }
}
