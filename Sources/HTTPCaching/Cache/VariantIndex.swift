import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The variant index: which `Vary` variants are stored for a URL, oldest first. It is an
/// entry of its own beside the URL's entry (its key's variant is `@variants`, a name no
/// variant can have: variant names are hex digests), so it travels through every store as
/// any entry does, and it is never part of an entry a caller sees. Written after the entry
/// under the URL; read only when a `Vary` response is stored, when a URL is invalidated or
/// removed, and by `explain`.
extension CacheEngine {
    /// The variant of the index's key.
    static let variantIndexName = "@variants"

    /// The key of the index for the URL of `primary`.
    func variantIndexKey(_ primary: CacheKey) -> CacheKey {
        var key = primary.primary
        key.variant = Self.variantIndexName
        return key
    }

    /// The variant names the index lists for the URL of `primary`, oldest first.
    func variantNames(of primary: CacheKey) -> [String] {
        guard let index = read(variantIndexKey(primary)) else { return [] }
        return String(decoding: index.body, as: UTF8.self).split(separator: ",").map(String.init)
    }

    /// For an entry about to be written under its URL with a `Vary`: the index with its
    /// variant listed last, and the keys of the variants that fall off it (stored longest
    /// ago), to remove once the write succeeds. Nil for an entry with no variants to list.
    func listing(_ entry: CacheEntry) -> (index: CacheEntry, dropped: [CacheKey])? {
        guard entry.key.variant == nil else { return nil }
        let names = Vary.names(entry.header("Vary")).filter { $0 != "*" }
        guard !names.isEmpty else { return nil }
        let name = Vary.variantName(names: names, values: entry.varyValues)
        var list = variantNames(of: entry.key)
        list.removeAll { $0 == name }
        list.append(name)
        var dropped: [CacheKey] = []
        while list.count > Vary.maxVariantsPerURL {
            var key = entry.key
            key.variant = list.removeFirst()
            dropped.append(key)
        }
        let index = CacheEntry(key: variantIndexKey(entry.key), url: entry.url, statusCode: 200, headers: [:],
                               body: Data(list.joined(separator: ",").utf8), storedAt: entry.storedAt)
        return (index, dropped)
    }

    /// Writes the index after the entry under its URL was stored, then removes the variants
    /// that fell off it. A failed write is reported; the variants it would list still answer.
    func commitListing(_ listing: (index: CacheEntry, dropped: [CacheKey])) {
        do {
            try store.write(listing.index)
        } catch {
            emit(.storeFailed(reason: "write: \(error)"), listing.index.key, listing.index.url)
        }
        for variant in listing.dropped {
            remove(variant, url: listing.index.url)
            emit(.evicted, variant, listing.index.url)
        }
    }

    /// The keys stored for the URL of `key`: its entry, every variant the index lists and the
    /// one `headers` select (it may be unlisted), and the index itself.
    func storedKeys(for key: CacheKey, headers: RequestHeaders) -> [CacheKey] {
        var names = Set(variantNames(of: key))
        if let primary = read(key.primary) {
            let vary = Vary.names(primary.header("Vary")).filter { $0 != "*" }
            if !vary.isEmpty { names.insert(Vary.variantName(names: vary, headers: headers)) }
        }
        let variants = names.sorted().map { name -> CacheKey in
            var variant = key.primary
            variant.variant = name
            return variant
        }
        return variants + [key.primary, variantIndexKey(key)]
    }
}
