import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one request was answered, as the response header and events report it.
///
/// A struct with static members rather than an enum, so new statuses can be added without
/// breaking code that compares against these (`status == .fresh`); switch on `rawValue` with a
/// `default` case.
public struct CacheStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Encodable {
    /// The status word, as `X-HTTP-Caching` carries it: `fresh`, `stale`, ...
    public let rawValue: String

    /// A status from its word; nil for a word that is not a status.
    public init?(rawValue: String) {
        guard Self.all.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }

    private init(_ word: String) { rawValue = word }

    /// Served from the store while fresh; no network.
    public static let fresh = CacheStatus("fresh")
    /// Served from the store, past its fresh window but usable; refreshed in the background.
    public static let stale = CacheStatus("stale")
    /// Nothing stored could answer: fetched from the network.
    public static let miss = CacheStatus("miss")
    /// The stored entry could not answer as it was (past its windows, or the request asked
    /// for the origin): fetched again.
    public static let expired = CacheStatus("expired")
    /// Not cacheable (method, status, `no-store`, a conditional request, the network-only
    /// policy): passed through untouched.
    public static let bypass = CacheStatus("bypass")
    /// Validated with the origin (a conditional request answered 304): the stored body, with
    /// the origin's new headers, its age reset.
    public static let revalidated = CacheStatus("revalidated")
    /// The network failed or the origin answered 5xx: an older entry served instead.
    public static let fallback = CacheStatus("fallback")

    /// Every status this version knows, in the order above.
    public static let all: [CacheStatus] = [fresh, stale, miss, expired, bypass, revalidated, fallback]

    /// The status word.
    public var description: String { rawValue }

    /// Encodes the status word.
    /// - Throws: what the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Why a request went to the network: RFC 9211's `fwd` parameter.
enum ForwardReason: String, Sendable, Equatable {
    /// Nothing stored under the URL.
    case uriMiss = "uri-miss"
    /// Something stored under the URL, but for other values of the fields its `Vary` names.
    case varyMiss = "vary-miss"
    /// Nothing stored could answer, and the cache cannot tell which of the two above (the
    /// store could not be read).
    case miss
    /// The stored entry was stale and could not be served stale.
    case stale
    /// The request's own directives (`no-cache`, `max-age`, a reload) forbade the stored entry.
    case request
    /// The method is not one the cache answers.
    case method
    /// The cache is set not to answer this request (policy, a conditional request, credentials).
    case bypass
    /// A partial entry is stored, but it cannot answer this request (RFC 9211's `partial`).
    case partial
}

/// How a stored entry answers without the network.
enum ServeForm: Sendable, Hashable {
    /// The whole response.
    case whole
    /// A HEAD: the stored GET's status and fields, no body.
    case headersOnly
    /// A 206 with these bytes of the body.
    case range(ClosedRange<Int>)
    /// A 416: the requested range lies outside the body.
    case rangeNotSatisfiable
    /// A 304 to the caller's own conditional request: the stored fields, no body.
    case notModified
}

/// Answering from the store, without the network.
struct ServePlan: Sendable, Equatable {
    /// `.fresh`, or `.stale` (served, then refreshed in the background).
    var status: CacheStatus
    /// What the `Age` field says.
    var age: TimeInterval
    /// Freshness left, in seconds; negative once stale (RFC 9211's `ttl`).
    var ttl: TimeInterval
    /// Whether to refresh the entry in the background.
    var refresh: Bool
    /// The whole response, its head, or a range of it.
    var form: ServeForm = .whole
}

/// Going to the network, and what to do with what comes back.
struct ForwardPlan: Sendable, Equatable {
    /// How a stored answer is reported: `.miss`, `.expired` or `.bypass`.
    var status: CacheStatus
    /// Why the request goes out.
    var reason: ForwardReason
    /// Send a conditional request built from the stored entry's validators; a 304 that
    /// selects the entry serves it as `.revalidated`.
    var validate = false
    /// Whether the response may be stored (not for `no-store` requests, other methods or the
    /// network-only policy).
    var store = true
    /// On a network error or a 5xx, serve the stored entry instead, as `.fallback`.
    var fallback = false
    /// The stored entry is of no more use (past every window, nothing to validate it with,
    /// no fallback): remove it now.
    var discardEntry = false
    /// The caller's own conditional or range request, or a method the cache does not answer:
    /// whatever comes back reaches the caller untouched, 304 and 206 included.
    var passThrough = false
    /// An unsafe method: a non-error answer invalidates the stored GET of its URL and of the
    /// same-origin URLs in its `Location` and `Content-Location`.
    var invalidates = false
    /// The stored entry answers the same request: a final answer that may not be stored
    /// makes it outdated, so it is removed.
    var replacesEntry = false
    /// A single-range GET with `storesPartialContent` on (with `passThrough`): a 206 that
    /// comes back is stored as a part, combined with the stored parts when they share a strong
    /// validator; a 200 is stored as any answer is; the caller gets either untouched.
    var storesPart = false
    /// A GET for the whole on a partial entry that has a strong validator: only the bytes the
    /// entry lacks are asked for (`Range` and `If-Range`); a 206 that completes it answers the
    /// caller with the whole (200), anything else the request as it was sent.
    var completesPart = false

    static func bypass(_ reason: ForwardReason, passThrough: Bool = false, invalidates: Bool = false) -> ForwardPlan {
        ForwardPlan(status: .bypass, reason: reason, store: false, passThrough: passThrough, invalidates: invalidates)
    }
}

/// What the cache does with one request. Produced by `CacheDecision`, carried out by the
/// transaction and the URLProtocol plumbing.
enum CacheAction: Sendable, Equatable {
    /// Answer from the stored entry.
    case serve(ServePlan)
    /// Go to the network.
    case forward(ForwardPlan)
    /// Fail the request: it forbade the network and nothing stored may answer
    /// (`HTTPCachingError.notCached`), or it names a policy the cache does not know.
    case fail(HTTPCachingError)
}
