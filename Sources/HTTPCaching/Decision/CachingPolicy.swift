import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a cache decides whether a stored entry may answer a request. Pick one per
/// configuration (`CacheConfiguration.policy`) and override it per request
/// (`URLRequest.cachingPolicy`).
///
/// A struct with static members rather than a public enum, so new policies can be added
/// without breaking anyone who switches over them. A policy of your own carries its rule
/// (`CachingPolicy.custom(_:_:)`), so a configuration can never name a policy it cannot apply.
public struct CachingPolicy: Sendable, Hashable, CustomStringConvertible, Encodable {
    /// The policy's name, as the private request header and the demo's `--policy` spell it.
    public let name: String
    /// The rule of a custom policy; nil for the built-in ones.
    let rule: (any CachePolicyRule)?

    private init(builtIn name: String) {
        self.name = name
        rule = nil
    }

    /// The built-in policy of that name (`two-tier`, `network-only`, `cache-first`,
    /// `cache-only`, `http`); nil for any other name.
    public init?(builtInNamed name: String) {
        guard let policy = Self.builtIn.first(where: { $0.name == name }) else { return nil }
        self = policy
    }

    /// A policy of your own: `rule` decides for every request that has a stored entry.
    /// A request selects it by value (`request.cachingPolicy = policy`); list it in
    /// `CacheConfiguration.customPolicies` so the cache can find it by name.
    public static func custom(_ name: String, _ rule: any CachePolicyRule) -> CachingPolicy {
        precondition(!builtIn.contains { $0.name == name }, "\(name) is the name of a built-in policy")
        return CachingPolicy(name: name, rule: rule)
    }

    private init(name: String, rule: (any CachePolicyRule)?) {
        self.name = name
        self.rule = rule
    }

    /// A policy known only by name (read back from a request), to be resolved by a cache.
    static func named(_ name: String) -> CachingPolicy {
        CachingPolicy(name: name, rule: nil)
    }

    /// The two windows: fresh (serve), usable (serve and refresh in the background), then
    /// fetch again. The default.
    public static let twoTier = CachingPolicy(builtIn: "two-tier")
    /// Never read or write the store: every request goes to the network.
    public static let networkOnly = CachingPolicy(builtIn: "network-only")
    /// Any stored entry, whatever its age, else the network.
    public static let cacheFirst = CachingPolicy(builtIn: "cache-first")
    /// Never touch the network: a stored entry whatever its age, else `HTTPCachingError.notCached`.
    public static let cacheOnly = CachingPolicy(builtIn: "cache-only")
    /// Freshness as the response states it, computed as a private cache does (RFC 9111 and
    /// RFC 5861's `stale-while-revalidate` and `stale-if-error`).
    public static let httpSemantics = CachingPolicy(builtIn: "http")

    /// The built-in policies.
    static let builtIn: [CachingPolicy] = [.twoTier, .networkOnly, .cacheFirst, .cacheOnly, .httpSemantics]

    /// The name.
    public var description: String { name }

    /// Encodes the policy's name.
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }

    /// Policies are equal when their names are.
    public static func == (lhs: CachingPolicy, rhs: CachingPolicy) -> Bool { lhs.name == rhs.name }

    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// A policy you write: given a request and its stored entry, say what to do. Make a policy of
/// it with `CachingPolicy.custom(_:_:)`.
public protocol CachePolicyRule: Sendable {
    /// Decides for a request that has a stored entry (a request without one always goes to
    /// the network, unless the request says `only-if-cached`: then it is answered 504).
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
///
/// A struct with static members rather than an enum, so verdicts can be added without
/// breaking rules that return these.
public struct CachePolicyVerdict: Sendable, Hashable, CustomStringConvertible {
    /// The verdicts the decision understands.
    enum Kind: Sendable, Hashable { case fresh, stale, revalidate, network }

    let kind: Kind

    /// Serve it; no network.
    public static let fresh = CachePolicyVerdict(kind: .fresh)
    /// Serve it at once and refresh it in the background.
    public static let stale = CachePolicyVerdict(kind: .stale)
    /// Ask the origin first: a conditional request if the entry has a validator; serve the
    /// entry on 304.
    public static let revalidate = CachePolicyVerdict(kind: .revalidate)
    /// Fetch a new response; the entry is replaced.
    public static let network = CachePolicyVerdict(kind: .network)

    /// The verdict's name: `fresh`, `stale`, `revalidate` or `network`.
    public var description: String { "\(kind)" }
}
