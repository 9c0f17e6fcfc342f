import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which requests have their body as part of the key: search and GraphQL APIs that put the
/// query in a POST body, and the `QUERY` method (draft-ietf-httpbis-safe-method-w-body), which
/// is safe and cacheable and carries a body.
///
/// A keyed request is cached as a GET is (looked up, stored, revalidated, collapsed), under a
/// key holding a SHA-256 digest of its `Content-Type`, its `Content-Encoding` and its body
/// (after `normalizer`); it is neither passed through nor an invalidation. Credentials partition it as they partition a GET.
/// A body larger than `maxBodySize` is not keyed: the request passes through, and a
/// `notStored(.bodyTooLargeToKey)` event says why.
public struct BodyKeying: Sendable {
    /// The methods whose body is keyed, compared with the method as sent (case-sensitive:
    /// `query` is not QUERY); `init` writes GET, HEAD, POST, PUT, DELETE and CONNECT in
    /// capitals, as Foundation sends them. The default is `QUERY`.
    public var methods: Set<String>
    /// Only requests whose URL this accepts are keyed; nil: every URL. The default is nil.
    public var urls: (@Sendable (URL) -> Bool)?
    /// What is digested for a body and its `Content-Type`, for example a GraphQL body without
    /// its `operationName`, or JSON with its keys sorted; nil: the body as it is. The default
    /// is nil.
    public var normalizer: (@Sendable (_ body: Data, _ contentType: String?) -> Data)?
    /// The largest body keyed, in bytes. The default is 1 MiB.
    public var maxBodySize: Int

    /// Body keying with the given parts; every argument has the default above.
    public init(methods: Set<String> = ["QUERY"], urls: (@Sendable (URL) -> Bool)? = nil,
                normalizer: (@Sendable (Data, String?) -> Data)? = nil, maxBodySize: Int = 1 << 20) {
        self.methods = Set(methods.map(RequestMethod.normalized))
        self.urls = urls
        self.normalizer = normalizer
        self.maxBodySize = maxBodySize
    }

    /// `QUERY` only: the default.
    public static let query = BodyKeying()

    /// Whether a request's body is keyed: its own setting (`URLRequest.keysBody`), else the
    /// method and URL.
    func applies(to request: URLRequest) -> Bool {
        let method = request.sentMethod
        guard method != "GET" && method != "HEAD" else { return false }
        if let own = request.value(forHTTPHeaderField: HTTPCachingHeaders.bodyKey) { return own == "1" }
        guard methods.contains(method), let url = request.url else { return false }
        return urls?(url) ?? true
    }

    /// The digest a keyed body adds to the key, from the body and the request's fields as they
    /// reach the network: what `digest(of:contentType:contentEncoding:)` makes of them.
    func digest(of body: Data, headers: RequestHeaders) -> String {
        digest(of: body, contentType: headers.value("Content-Type"), contentEncoding: headers.value("Content-Encoding"))
    }

    /// The digest a keyed body adds to the key: SHA-256 of the `Content-Type`, the normalised
    /// body and, for a content-coded body, its codings (`codings(_:)`), 32 hex digits. A body
    /// with no coding keeps the digest it had before codings were keyed (the type, a zero byte,
    /// the body); a coded one's message starts with a byte 1, which no field value can start with.
    func digest(of body: Data, contentType: String?, contentEncoding: String?) -> String {
        let normalized = normalizer?(body, contentType) ?? body
        var message: [UInt8] = []
        if let codings = Self.codings(contentEncoding) { message = [1] + Array(codings.utf8) + [0] }
        message += Array((contentType ?? "").utf8) + [0]
        message += normalized
        return hexString(SHA256.hash(message).prefix(16))
    }

    /// The codings a `Content-Encoding` field lists, trimmed, lower-cased and comma-joined,
    /// `identity` left out; nil when it lists none.
    static func codings(_ field: String?) -> String? {
        guard let field else { return nil }
        let codings = field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? nil : codings.joined(separator: ",")
    }
}

extension URLRequest {
    /// Whether this request's body is part of its key, overriding the configuration's
    /// `bodyKeying`; nil follows the configuration. The default is nil.
    ///
    /// Carried in a private header that is removed before the request reaches the network.
    public var keysBody: Bool? {
        get { value(forHTTPHeaderField: HTTPCachingHeaders.bodyKey).map { $0 == "1" } }
        set { setValue(newValue.map { $0 ? "1" : "0" }, forHTTPHeaderField: HTTPCachingHeaders.bodyKey) }
    }
}
