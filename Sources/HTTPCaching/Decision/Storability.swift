import Foundation

/// Why a response was not stored: the answer to "why is this never cached?", carried by
/// `CacheEvent.Kind.notStored` and by `CacheInstallation.explain(_:)`.
///
/// A struct with static members rather than an enum, so reasons can be added without breaking
/// code that compares against these; `name` tells them apart, `description` explains.
public struct NotStoredReason: Sendable, Hashable, CustomStringConvertible {
    enum Value: Sendable, Hashable {
        case method(String), status(Int), responseNoStore, requestNoStore, statusNotUnderstood(Int), varyStar, setsCookie
        case credentials, tooLarge(bytes: Int, limit: Int), declinedByCacher, declinedByDelegate, memoryOnly, passThrough
        case bodyTooLargeToKey(bytes: Int, limit: Int)
        case unusablePart(String), tooManySpans(limit: Int), connectionNamesCachingField(String), storeFull
        case redirectedUnseen
    }

    let value: Value

    /// The method is not GET (only GET responses are stored; a HEAD is answered from them).
    public static func method(_ method: String) -> Self { Self(value: .method(method)) }
    /// The status is not one the policy stores (under `.twoTier`: not in
    /// `storableStatusCodes`; under `.httpSemantics`: not heuristically cacheable and no
    /// explicit freshness), or is 1xx, 206 or 304.
    public static func status(_ status: Int) -> Self { Self(value: .status(status)) }
    /// The response says `no-store`.
    public static let responseNoStore = Self(value: .responseNoStore)
    /// The request says `no-store`, or its policy never stores (network-only).
    public static let requestNoStore = Self(value: .requestNoStore)
    /// `must-understand` with a status the cache does not understand (RFC 9111 section 5.2.2.3).
    public static func statusNotUnderstood(_ status: Int) -> Self { Self(value: .statusNotUnderstood(status)) }
    /// `Vary: *`: no request could ever match it.
    public static let varyStar = Self(value: .varyStar)
    /// The response sets a cookie and `storesResponsesSettingCookies` is false.
    public static let setsCookie = Self(value: .setsCookie)
    /// The request carries credentials and `storesCredentialedResponses` is false.
    public static let credentials = Self(value: .credentials)
    /// The body is larger than the store keeps (its entry limit).
    public static func tooLarge(bytes: Int, limit: Int) -> Self { Self(value: .tooLarge(bytes: bytes, limit: limit)) }
    /// The configuration's `responseCacher` declined it.
    public static let declinedByCacher = Self(value: .declinedByCacher)
    /// The caller's delegate answered `willCacheResponse` with nil, or with a response whose
    /// storage policy is `.notAllowed`.
    public static let declinedByDelegate = Self(value: .declinedByDelegate)
    /// The caller's delegate allowed it in memory only, and the store keeps nothing in memory.
    public static let memoryOnly = Self(value: .memoryOnly)
    /// The caller's own conditional or range request: its answer passes through untouched.
    public static let passThrough = Self(value: .passThrough)
    /// The request's body would be part of its key (`BodyKeying`) but is larger than
    /// `maxBodySize`: the request passes through.
    public static func bodyTooLargeToKey(bytes: Int, limit: Int) -> Self { Self(value: .bodyTooLargeToKey(bytes: bytes, limit: limit)) }
    /// A 206 that cannot be stored as a part (`storesPartialContent`): its `Content-Range` is
    /// not one byte range with a known complete length, its content does not match it, or it
    /// is content-coded; `detail` says which.
    public static func unusablePart(_ detail: String) -> Self { Self(value: .unusablePart(detail)) }
    /// Combined with the parts stored, a 206 would leave more than `maxPartialSpans` spans:
    /// it is not stored, and the stored parts stay.
    public static func tooManySpans(limit: Int) -> Self { Self(value: .tooManySpans(limit: limit)) }
    /// `Connection` names a field the cache decides by (`Vary`, `Cache-Control`, ...): stored
    /// without it (as hop-by-hop fields are), the entry would be reused where the origin said not.
    public static func connectionNamesCachingField(_ field: String) -> Self { Self(value: .connectionNamesCachingField(field)) }
    /// The store had no room it could make (Redis out of memory under `maxmemory-policy
    /// noeviction`): nothing of the entry is stored, and the earlier one is removed.
    public static let storeFull = Self(value: .storeFull)
    /// Foundation's own HTTP class, sending a completion-handler task's miss, followed a
    /// redirect the cache did not see: the answer is another URL's. The key's next miss goes
    /// through the cache's own session, which stores the redirect.
    public static let redirectedUnseen = Self(value: .redirectedUnseen)

    /// The reason's name, the same for every value of it: `method`, `status`,
    /// `responseNoStore`, `requestNoStore`, `statusNotUnderstood`, `varyStar`, `setsCookie`,
    /// `credentials`, `tooLarge`, `declinedByCacher`, `declinedByDelegate`, `memoryOnly`,
    /// `passThrough`, `bodyTooLargeToKey`, `unusablePart`, `tooManySpans`,
    /// `connectionNamesCachingField`, `storeFull` or `redirectedUnseen`; later versions may add more.
    public var name: String {
        switch value {
        case .method: "method"
        case .status: "status"
        case .statusNotUnderstood: "statusNotUnderstood"
        case .tooLarge: "tooLarge"
        case .bodyTooLargeToKey: "bodyTooLargeToKey"
        case .unusablePart: "unusablePart"
        case .tooManySpans: "tooManySpans"
        case .connectionNamesCachingField: "connectionNamesCachingField"
        default: "\(value)"
        }
    }

    /// What the reason means, in a sentence.
    public var description: String {
        switch value {
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
        case .bodyTooLargeToKey(let bytes, let limit):
            "the request's body (\(bytes) bytes) is larger than bodyKeying.maxBodySize (\(limit) bytes), so it is not keyed"
        case .unusablePart(let detail): "the 206 cannot be stored as a part: \(detail)"
        case .tooManySpans(let limit): "combined with the parts stored, the 206 would leave more than \(limit) spans (maxPartialSpans)"
        case .connectionNamesCachingField(let field): "Connection names \(field), which the cache decides by"
        case .storeFull: "the store is full and cannot make room (Redis out of memory under noeviction)"
        case .redirectedUnseen: "Foundation's HTTP class followed a redirect the cache did not see: the answer is another URL's"
        }
    }

    /// A short token for the reason, for the `detail` of a `Cache-Status` member.
    var token: String {
        switch value {
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
        case .bodyTooLargeToKey: "not-stored-body-too-large-to-key"
        case .unusablePart: "not-stored-unusable-part"
        case .tooManySpans: "not-stored-too-many-spans"
        case .connectionNamesCachingField: "not-stored-connection-field"
        case .storeFull: "not-stored-store-full"
        case .redirectedUnseen: "not-stored-redirected"
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
        if let field = connectionNamed(response).first(where: cachingFields.contains) { return .connectionNamesCachingField(field) }
        if !configuration.storesResponsesSettingCookies && response.header("Set-Cookie") != nil { return .setsCookie }
        if credentialed && !configuration.storesCredentialedResponses { return .credentials }
        return nil
    }

    /// Hop-by-hop fields (RFC 9111 section 3.1) and the cache's own status fields are never stored.
    static let unstoredHeaders: Set<String> = ["connection", "keep-alive", "proxy-connection", "te",
                                               "transfer-encoding", "upgrade", "proxy-authenticate",
                                               "proxy-authorization", HTTPCachingHeaders.statusField.lowercased()]

    /// The header fields of a response as they are stored: without hop-by-hop fields, the
    /// fields `Connection` names, and the cache's status fields; without `Set-Cookie` unless
    /// the configuration stores responses that set cookies; without a `Content-Length` that a
    /// `Transfer-Encoding` overrode (RFC 9112 section 6.3: it does not give the body's length).
    static func storedHeaders(of response: ResponseHead, keepingCookies: Bool) -> [String: String] {
        var unstored = Set(connectionNamed(response))
        if response.header("Transfer-Encoding") != nil { unstored.insert("content-length") }
        return response.headers.filter { name, _ in
            let lower = name.lowercased()
            if lower == "set-cookie" && !keepingCookies { return false }
            return !unstoredHeaders.contains(lower) && !unstored.contains(lower)
        }
    }

    /// The fields `Connection` names, lowercased.
    static func connectionNamed(_ response: ResponseHead) -> [String] {
        (response.header("Connection") ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }

    /// Fields the cache reads to decide reuse: a response whose `Connection` names one is not stored.
    static let cachingFields: Set<String> = ["cache-control", "pragma", "expires", "vary", "age", "date", "last-modified", "etag"]
}
