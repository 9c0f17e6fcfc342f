import Foundation

/// Why a response was not stored: the answer to "why is this never cached?", carried by
/// `CacheEvent.Kind.notStored` and by `HTTPCache.explain(_:)`.
public enum NotStoredReason: Sendable, Hashable, CustomStringConvertible {
    /// The method is not GET (only GET responses are stored; a HEAD is answered from them).
    case method(String)
    /// The status is not one the policy stores (under `.twoTier`: not in
    /// `storableStatusCodes`; under `.httpSemantics`: not heuristically cacheable and no
    /// explicit freshness), or is 1xx, 206 or 304.
    case status(Int)
    /// The response says `no-store`.
    case responseNoStore
    /// The request says `no-store`, or its policy never stores (network-only).
    case requestNoStore
    /// `must-understand` with a status the cache does not understand (RFC 9111 section 5.2.2.3).
    case statusNotUnderstood(Int)
    /// `Vary: *`: no request could ever match it.
    case varyStar
    /// The response sets a cookie and `storesResponsesSettingCookies` is false.
    case setsCookie
    /// The request carries credentials and `storesCredentialedResponses` is false.
    case credentials
    /// The body is larger than the store keeps (`ResponseStore.maxEntrySize`).
    case tooLarge(bytes: Int, limit: Int)
    /// The configuration's `responseCacher` declined it.
    case declinedByCacher
    /// The caller's delegate answered `willCacheResponse` with nil, or with a response whose
    /// storage policy is `.notAllowed`.
    case declinedByDelegate
    /// The caller's delegate allowed it in memory only, and the store keeps nothing in memory.
    case memoryOnly
    /// The caller's own conditional or range request: its answer passes through untouched.
    case passThrough

    /// What the reason means, in a sentence.
    public var description: String {
        switch self {
        case .method(let method): "\(method) responses are not stored; only GET"
        case .status(let status): "status \(status) is not stored under this policy"
        case .responseNoStore: "the response says Cache-Control: no-store"
        case .requestNoStore: "the request says no-store, or its policy never stores"
        case .statusNotUnderstood(let status): "must-understand with status \(status), which the cache does not understand"
        case .varyStar: "the response says Vary: *, which no request can match"
        case .setsCookie: "the response sets a cookie (storesResponsesSettingCookies is false)"
        case .credentials: "the request carries credentials (storesCredentialedResponses is false)"
        case .tooLarge(let bytes, let limit): "the response (\(bytes) bytes) is larger than the store's entry limit (\(limit) bytes)"
        case .declinedByCacher: "the configuration's responseCacher declined it"
        case .declinedByDelegate: "the task's delegate declined it in willCacheResponse"
        case .memoryOnly: "the task's delegate allowed it in memory only, and the store keeps nothing in memory"
        case .passThrough: "the caller's own conditional or range request passes through untouched"
        }
    }
}

extension NotStoredReason {
    /// A short token for the reason, for the `detail` of a `Cache-Status` member.
    var token: String {
        switch self {
        case .method: "not-stored-method"
        case .status: "not-stored-status"
        case .responseNoStore: "not-stored-no-store"
        case .requestNoStore: "not-stored-request-no-store"
        case .statusNotUnderstood: "not-stored-must-understand"
        case .varyStar: "not-stored-vary-star"
        case .setsCookie: "not-stored-set-cookie"
        case .credentials: "not-stored-credentials"
        case .tooLarge: "not-stored-too-large"
        case .declinedByCacher: "not-stored-declined"
        case .declinedByDelegate: "not-stored-declined-by-delegate"
        case .memoryOnly: "not-stored-memory-only"
        case .passThrough: "pass-through"
        }
    }
}

/// Whether a response may be stored (RFC 9111 section 3 as a private cache, or the two-tier
/// status list), and why not.
enum Storability {
    /// Statuses whose meaning the cache understands, for `must-understand`.
    static let understoodStatuses: Set<Int> = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]

    /// Nil if the response may be stored, else why not. The body size is checked separately.
    /// - Parameters:
    ///   - method: the request's method, upper-cased.
    ///   - policy: the policy deciding for the request.
    ///   - credentialed: whether the request carries credentials that partition it.
    static func reasonNotToStore(method: String, response: ResponseHead, policy: CachingPolicy, credentialed: Bool,
                                 configuration: CacheConfiguration) -> NotStoredReason? {
        guard method == "GET" else { return .method(method) }
        let status = response.statusCode
        guard status >= 200, status != 206, status != 304 else { return .status(status) }
        let directives = CacheControl(response.header("Cache-Control"))
        if directives.has("must-understand") {
            guard understoodStatuses.contains(status) else { return .statusNotUnderstood(status) }
        } else if directives.has("no-store") {
            return .responseNoStore
        }
        if policy == .httpSemantics {
            guard Freshness.heuristicallyCacheable.contains(status) || Freshness.isExplicitlyCacheable(header: response.header) else {
                return .status(status)
            }
        } else if !configuration.storableStatusCodes.contains(status) {
            return .status(status)
        }
        if Vary.names(response.header("Vary")).contains("*") { return .varyStar }
        if !configuration.storesResponsesSettingCookies && response.header("Set-Cookie") != nil { return .setsCookie }
        if credentialed && !configuration.storesCredentialedResponses { return .credentials }
        return nil
    }

    /// Hop-by-hop fields (RFC 9111 section 3.1) and the cache's own status fields are never stored.
    static let unstoredHeaders: Set<String> = ["connection", "keep-alive", "proxy-connection", "te",
                                               "transfer-encoding", "upgrade", "proxy-authenticate",
                                               "proxy-authorization", HTTPCachingHeaders.status.lowercased()]

    /// The header fields of a response as they are stored: without hop-by-hop fields, the
    /// fields `Connection` names, and the cache's status fields; without `Set-Cookie` unless
    /// the configuration stores responses that set cookies.
    static func storedHeaders(of response: ResponseHead, keepingCookies: Bool) -> [String: String] {
        let named = Set((response.header("Connection") ?? "")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        return response.headers.filter { name, _ in
            let lower = name.lowercased()
            if lower == "set-cookie" && !keepingCookies { return false }
            return !unstoredHeaders.contains(lower) && !named.contains(lower)
        }
    }
}
