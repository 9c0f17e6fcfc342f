import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What `URLSessionConfiguration.enableHTTPCaching(_:)` installed: the cache, and the
/// management of one request's entry, keyed exactly as the configuration's sessions key
/// requests, with their own `httpAdditionalHeaders` (credentials among them) taken into account.
public final class CacheInstallation: Sendable {
    /// The cache the sessions answer from.
    public var cache: HTTPCache { binding.cache }
    /// The protocol class that answers for these sessions (for `URLProtocol.registerClass`
    /// when the installation came from `CachingURLProtocol.installation(for:forwardingConfiguration:)`).
    public let protocolClass: AnyClass
    let binding: ProtocolBinding

    init(binding: ProtocolBinding, protocolClass: AnyClass) {
        self.binding = binding
        self.protocolClass = protocolClass
    }

    /// What these sessions asked of the cache since the installation was made (requests by
    /// how they were answered, origin requests, bytes, refreshes), with the store's counters
    /// and gauges, which are the cache's: the installations of one cache share its store.
    public var statistics: CacheStatistics {
        var mine = binding.statistics.snapshot(store: binding.cache.store)
        let cache = binding.cache.statistics
        mine.stored = cache.stored
        mine.notStored = cache.notStored
        mine.evictions = cache.evictions
        mine.invalidations = cache.invalidations
        mine.corruptions = cache.corruptions
        mine.storeFailures = cache.storeFailures
        return mine
    }

    /// The key a request is stored under by these sessions.
    /// - Throws: what the store's `partitionSecret()` throws, for a credentialed request.
    public func key(for request: URLRequest) throws -> CacheKey {
        try binding.key(for: request)
    }

    /// Whether an entry is stored for a request, whatever its age.
    public func hasEntry(for request: URLRequest) -> Bool {
        cachedEntry(for: request) != nil
    }

    /// The entry stored for a request, whatever its age (one stored for an equivalent URL that
    /// its `No-Vary-Search` lets answer included); nil if none.
    public func cachedEntry(for request: URLRequest) -> CacheEntry? {
        binding.engine.cachedEntry(for: request, keys: binding.keys)
    }

    /// Stores a response for a request by hand, as if it had just come from the network,
    /// whatever its status or headers say, with the windows set for the request
    /// (`setWindows(_:for:)`), else the cache's.
    /// - Returns: whether the store kept it (false if it exceeds the store's limits).
    /// - Throws: the store's error when it cannot write.
    @discardableResult
    public func storeResponse(_ response: HTTPURLResponse, data: Data, for request: URLRequest) throws -> Bool {
        try binding.engine.storeResponse(response, data: data, for: request, windows: nil, keys: binding.keys)
    }

    /// Sets the windows for one request's entry, now and for every response stored for it
    /// from now on (this process only). nil clears them.
    /// - Throws: the store's error when it cannot read or write the entry.
    public func setWindows(_ windows: CacheWindows?, for request: URLRequest) throws {
        try binding.engine.setWindows(windows, for: request, keys: binding.keys)
    }

    /// Removes the entry stored for a request, if any, every `Vary` variant, and what is stored
    /// for it through `No-Vary-Search`.
    /// - Throws: the store's error when it cannot remove.
    public func removeEntry(for request: URLRequest) throws {
        try binding.engine.removeEntry(for: request, keys: binding.keys)
    }
}

extension URLSessionConfiguration {
    /// Installs caching: puts a caching protocol class bound to `cache` first in
    /// `protocolClasses`, keeping a copy of these settings as they were (headers, timeouts,
    /// cookie and credential storage, other protocol classes) for the requests the cache
    /// forwards, so they carry exactly what they carried before.
    ///
    /// It also sets `urlCache` to an object that stores nothing and keeps the installation
    /// alive exactly as long as this configuration or a session made from it: do not replace
    /// `urlCache` afterwards. Settings changed after the call do not reach forwarded requests.
    /// Calling it again replaces the earlier installation.
    /// - Parameter cache: the cache to answer from. The default is `HTTPCache.shared`.
    /// - Returns: the installation, for management calls keyed as these sessions key requests.
    @discardableResult
    public func enableHTTPCaching(_ cache: HTTPCache = .shared) -> CacheInstallation {
        let others = (protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        let original = copy() as! URLSessionConfiguration
        original.protocolClasses = others
        if original.urlCache is InstallationCarrier { original.urlCache = nil }
        let binding = ProtocolBinding(cache: cache, forwarding: original)
        let protocolClass = BindingRegistry.makeClass(for: binding, permanent: false)
        protocolClasses = [protocolClass] + others
        urlCache = InstallationCarrier(binding: binding, protocolClass: protocolClass)
        return CacheInstallation(binding: binding, protocolClass: protocolClass)
    }
}
