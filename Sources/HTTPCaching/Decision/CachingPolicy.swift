import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a cache decides whether a stored entry may answer a request. Pick one per
/// configuration (`CacheConfiguration.policy`) and override it per request
/// (`URLRequest.cachingPolicy`).
///
/// A struct with static members rather than a public enum, so new policies can be added
/// without breaking anyone who switches over them.
public struct CachingPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The policy's name, as the private request header and the demo's `--policy` spell it.
    public let name: String

    /// A policy known by name: one of the built-in ones, or one registered in
    /// `CacheConfiguration.customPolicies`.
    public init(named name: String) { self.name = name }

    /// The two windows: fresh (serve), usable (serve and refresh in the background), then
    /// fetch again. The default.
    public static let twoTier = CachingPolicy(named: "two-tier")
    /// Never read or write the store: every request goes to the network.
    public static let networkOnly = CachingPolicy(named: "network-only")
    /// Any stored entry, whatever its age, else the network.
    public static let cacheFirst = CachingPolicy(named: "cache-first")
    /// Never touch the network: a stored entry whatever its age, else `CachingError.notCached`.
    public static let cacheOnly = CachingPolicy(named: "cache-only")
    /// Freshness as the response states it, computed as a private cache does (RFC 9111 and
    /// RFC 5861's `stale-while-revalidate` and `stale-if-error`).
    public static let httpSemantics = CachingPolicy(named: "http")

    /// The built-in policies.
    public static let builtIn: [CachingPolicy] = [.twoTier, .networkOnly, .cacheFirst, .cacheOnly, .httpSemantics]

    public var description: String { name }
}

/// A policy you write: given a request and its stored entry, say what to do. Register it
/// under a name in `CacheConfiguration.customPolicies` and select it with
/// `CachingPolicy(named:)`.
public protocol CachePolicyRule: Sendable {
    /// Decides for a request that has a stored entry (a request without one always goes to
    /// the network, unless the request says `only-if-cached`).
    func verdict(for context: CachePolicyContext) -> CachePolicyVerdict
}

/// What a policy sees.
public struct CachePolicyContext: Sendable {
    /// The request as the caller sent it.
    public let request: URLRequest
    /// The stored entry.
    public let entry: CacheEntry
    /// Seconds since the entry was stored.
    public let age: TimeInterval
    /// The time now, by the cache's clock.
    public let now: Date
    /// The windows that apply to this request and entry.
    public let windows: CacheWindows
}

/// What a policy decides for a stored entry.
public enum CachePolicyVerdict: Sendable, Equatable {
    /// Serve it; no network.
    case fresh
    /// Serve it at once and refresh it in the background.
    case stale
    /// Ask the origin first: a conditional request if the entry has a validator; serve the
    /// entry on 304.
    case revalidate
    /// Fetch a new response; the entry is replaced.
    case network
}
