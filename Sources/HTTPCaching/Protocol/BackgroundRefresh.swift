import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A background refresh of a stale entry: an exchange with no caller, at most one at a time
/// per key in this process, and across processes as far as the store's claims reach.
enum BackgroundRefresh {
    /// Starts refreshing `previous` (served stale to the caller of `hop`), unless a refresh of
    /// its key is running here or claimed by another process.
    static func start(_ previous: CacheEntry, hop: Hop, binding: ProtocolBinding) {
        let cache = binding.engine
        guard cache.beginRefresh(previous.key) else { return }
        cache.ioQueue(for: previous.key.url).async {
            guard cache.store.claimRefresh(of: previous.key, lease: 60) else {
                cache.endRefresh(previous.key)
                return
            }
            binding.count(refreshesStarted: 1)
            var refreshHop = hop
            if refreshHop.bodyDigest == nil { refreshHop.body = .none } // a keyed body is sent again
            // The caller's key, not the entry's: an entry found through its No-Vary-Search is
            // stored again under the key its answer's config gives the caller's URL.
            refreshHop.key = hop.key.primary
            let exchange = Exchange(role: .refresh(previous: previous), hop: refreshHop, binding: binding)
            exchange.state.withLock { $0.claim = previous.key }
            exchange.start(key: refreshHop.key, entry: previous, otherVariant: false)
        }
    }
}
