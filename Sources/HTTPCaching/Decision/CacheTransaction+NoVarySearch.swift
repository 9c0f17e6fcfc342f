import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `No-Vary-Search` in one request's life: where its answer is stored, and whether an entry
/// stored for another URL answered it.
extension CacheTransaction {
    /// The key an answer with these fields is stored under: the request's own, or, when the
    /// answer declares a non-default `No-Vary-Search` and the configuration honours it, the
    /// key of the request's URL normalized by it (`NoVarySearch.entryKey(for:)`). A keyed body
    /// is always stored under its own key.
    func storageKey(_ header: (String) -> String?) -> CacheKey {
        let key = context.key.primary
        guard context.configuration.honorsNoVarySearch, !context.keyedBody, NoVarySearch.applies(to: key),
              let config = NoVarySearch.declared(by: header), let stored = config.entryKey(for: key) else { return key }
        return stored
    }

    /// Whether `entry`, found through its `No-Vary-Search`, was stored for another URL than the
    /// request's (`Cache-Status` then says `detail=no-vary-search`).
    func answersThroughNoVarySearch(_ entry: CacheEntry) -> Bool {
        NoVarySearch.answersAnotherURL(entry, requestKey: context.key, requestURL: context.request.url)
    }
}
