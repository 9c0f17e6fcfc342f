import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request's header fields as they will reach the network: the request's own, else the
/// session's `httpAdditionalHeaders` (which Foundation adds only later, in its HTTP class).
struct RequestHeaders: Sendable {
    let request: URLRequest
    let session: [String: String]

    init(_ request: URLRequest, session: [String: String] = [:]) {
        self.request = request
        self.session = session
    }

    func value(_ name: String) -> String? {
        if let value = request.value(forHTTPHeaderField: name) { return value }
        guard !session.isEmpty else { return nil }
        return session[name] ?? session.first { $0.key.equalsIgnoringASCIICase(name) }?.value
    }

    /// Every field, the request's own winning over the session's of the same name.
    var all: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        let own = request.allHTTPHeaderFields ?? [:]
        for (name, value) in own { fields.append((name, value)) }
        for (name, value) in session where !own.keys.contains(where: { $0.equalsIgnoringASCIICase(name) }) {
            fields.append((name, value))
        }
        return fields
    }
}

/// Which request header fields partition entries by credentials: a request carrying any of
/// them (from itself or from its session) is stored under a key of its own, holding a keyed
/// hash of their values, so one user's response never answers another's request.
public struct CredentialPartitioning: Sendable, Hashable {
    /// Fields that partition wherever they come from, compared case-insensitively. The
    /// default is `standardHeaders`.
    public var headers: Set<String> {
        didSet { listed = Set(headers.map { $0.lowercased() }) }
    }
    /// Whether every field the session adds (`httpAdditionalHeaders`) partitions too, except
    /// `harmlessSessionHeaders`: a session made for one user often carries that user's
    /// identity in a field no list can foresee. The default is true.
    public var includesSessionHeaders: Bool
    /// Session fields that never partition, because they say nothing about who asks. The
    /// default is `standardHarmlessSessionHeaders`.
    public var harmlessSessionHeaders: Set<String> {
        didSet { harmless = Set(harmlessSessionHeaders.map { $0.lowercased() }) }
    }
    /// `headers` and `harmlessSessionHeaders` lower-cased, kept beside them: they are looked
    /// up on every request.
    private var listed: Set<String>
    private var harmless: Set<String>

    /// `Authorization`, `Proxy-Authorization`, `Cookie`, and the common API-key fields.
    public static let standardHeaders: Set<String> = [
        "Authorization", "Proxy-Authorization", "Cookie", "X-API-Key", "API-Key", "X-Auth-Token",
        "X-Access-Token", "X-Amz-Security-Token", "X-Goog-Api-Key", "Ocp-Apim-Subscription-Key",
    ]
    /// `Accept`, `Accept-Charset`, `Accept-Encoding`, `Accept-Language`, `User-Agent`,
    /// `Cache-Control`, `Pragma`, `DNT`, `Connection`.
    public static let standardHarmlessSessionHeaders: Set<String> = [
        "Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "User-Agent",
        "Cache-Control", "Pragma", "DNT", "Connection",
    ]

    /// Partitioning with the given parts; every argument has the default above.
    public init(headers: Set<String> = CredentialPartitioning.standardHeaders, includesSessionHeaders: Bool = true,
                harmlessSessionHeaders: Set<String> = CredentialPartitioning.standardHarmlessSessionHeaders) {
        self.headers = headers
        self.includesSessionHeaders = includesSessionHeaders
        self.harmlessSessionHeaders = harmlessSessionHeaders
        listed = Set(headers.map { $0.lowercased() })
        harmless = Set(harmlessSessionHeaders.map { $0.lowercased() })
    }

    /// The standard partitioning.
    public static let standard = CredentialPartitioning()

    /// The fields of a request that partition it, lower-cased and sorted, plus the URL's
    /// userinfo; empty when nothing does.
    func inputs(_ headers: RequestHeaders) -> [(name: String, value: String)] {
        let own = headers.request.allHTTPHeaderFields ?? [:]
        // The common case, on every request's path: nothing that could partition.
        if own.isEmpty && headers.session.isEmpty
            && !(headers.request.url?.absoluteString.utf8.contains(UInt8(ascii: "@")) ?? false) {
            return []
        }
        var found: [String: String] = [:]
        for (name, value) in own {
            let lower = name.lowercased()
            if listed.contains(lower) { found[lower] = value }
        }
        for (name, value) in headers.session {
            let lower = name.lowercased()
            guard found[lower] == nil, !own.keys.contains(where: { $0.equalsIgnoringASCIICase(name) }) else { continue }
            if listed.contains(lower) || (includesSessionHeaders && !harmless.contains(lower)
                                          && !HTTPCachingHeaders.isPrivate(name)) {
                found[lower] = value
            }
        }
        var inputs = found.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        if let url = headers.request.url, let userinfo = CacheKey.userinfo(of: url) {
            inputs.append((name: "@userinfo", value: userinfo))
        }
        return inputs
    }
}

extension CacheConfiguration {
    /// The partitioning in force: `partitioning`, but without `Cookie` when the cache stores
    /// responses that set cookies, which declares it private to one user (a cookie the origin
    /// just set would otherwise give the next request a key of its own, and never a hit).
    var effectivePartitioning: CredentialPartitioning {
        guard storesResponsesSettingCookies else { return partitioning }
        var partitioning = partitioning
        partitioning.headers = partitioning.headers.filter { !$0.equalsIgnoringASCIICase("Cookie") }
        partitioning.harmlessSessionHeaders.insert("Cookie")
        return partitioning
    }
}

/// The one way a request becomes a key, used by the protocol and by every management call:
/// normalization, the configuration's rewrite hook, the credential partition and the namespace.
struct KeyDerivation: Sendable {
    let configuration: CacheConfiguration
    /// The session's `httpAdditionalHeaders`, which reach the network but not the request.
    let sessionHeaders: [String: String]

    func headers(_ request: URLRequest) -> RequestHeaders {
        RequestHeaders(request, session: sessionHeaders)
    }

    /// Whether anything in the request partitions it by credentials.
    func isCredentialed(_ headers: RequestHeaders) -> Bool {
        !configuration.effectivePartitioning.inputs(headers).isEmpty
    }

    /// The digest of a request's own `httpBody`, when the configuration keys it and it is within
    /// the limit.
    func ownBodyDigest(of request: URLRequest, headers: RequestHeaders) -> String? {
        let keying = configuration.bodyKeying
        guard let body = request.httpBody, body.count <= keying.maxBodySize, keying.applies(to: request) else { return nil }
        return keying.digest(of: body, headers: headers)
    }

    /// A `Host` field that names another authority than the URL's (lower-cased, trimmed, an
    /// IPv6 address bracketed, the scheme's default port dropped): the origin resolves the
    /// target from it, so it is part of the key, as `#host=<value>` (a fragment no normalized
    /// URL has); nil when there is none or it names the URL's own.
    static func hostOverride(_ field: String?, of url: URL?) -> String? {
        guard let field = field?.trimmingCharacters(in: .whitespaces).lowercased(), !field.isEmpty else { return nil }
        let scheme = url?.scheme?.lowercased()
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        func authority(_ host: String, _ port: Int?) -> String {
            let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return port.map { $0 == defaultPort ? bracketed : "\(bracketed):\($0)" } ?? bracketed
        }
        // The field's host and port: a port follows the last colon outside brackets.
        let colon = field.lastIndex(of: ":").flatMap { field[$0...].contains("]") ? nil : $0 }
        let port = colon.flatMap { Int(field[field.index(after: $0)...]) }
        let named = port == nil ? field : authority(String(field[..<colon!]), port)
        guard let host = url?.host?.lowercased() else { return named }
        return named == authority(host, url?.port) ? nil : named
    }

    /// The key of the entry stored under the request's URL (no variant).
    /// - Parameters:
    ///   - method: the method the key is for; the default is the request's own (GET for HEAD).
    ///   - bodyDigest: a keyed body's digest (`BodyKeying`), added to the key's URL as
    ///     `#body=<digest>` (a fragment no normalized URL has); nil: the digest of the request's
    ///     `httpBody` when the configuration keys it. A `Host` field naming another authority
    ///     follows it (`hostOverride`).
    ///   - secret: the store's partition secret, asked for only when the request has credentials.
    /// - Throws: what `secret` throws.
    func key(for request: URLRequest, headers: RequestHeaders, method: String? = nil, bodyDigest: String? = nil,
             secret: () throws -> [UInt8]) rethrows -> CacheKey {
        var verb = method.map(RequestMethod.normalized) ?? request.sentMethod
        if verb == "HEAD" { verb = "GET" } // a HEAD is answered from the stored GET
        var key = CacheKey(method: verb, url: request.url ?? URL(fileURLWithPath: "/"))
        if let rewriter = configuration.keyRewriter { key = rewriter(key, request) }
        if let digest = bodyDigest ?? ownBodyDigest(of: request, headers: headers) { key.url += "#body=" + digest }
        if let host = Self.hostOverride(headers.value("Host"), of: request.url) { key.url += "#host=" + host }
        key.variant = nil
        key.namespace = configuration.namespace
        let inputs = configuration.effectivePartitioning.inputs(headers)
        if inputs.isEmpty {
            key.partition = nil
        } else {
            var message: [UInt8] = []
            for (name, value) in inputs {
                message += Array(name.utf8) + [0] + Array(value.utf8) + [0]
            }
            let code = HMACSHA256.authenticationCode(key: try secret(), message: message)
            key.partition = CredentialPartition(rawValue: hexString(code.prefix(16)))
        }
        return key
    }

    /// The key of the variant of `primary` that answers requests with these header values for
    /// the fields a response's `Vary` names.
    func variantKey(of primary: CacheKey, varyNames: [String], headers: RequestHeaders) -> CacheKey {
        var key = primary
        key.variant = Vary.variantName(names: varyNames, headers: headers)
        return key
    }
}

/// `Vary` (RFC 9110 section 12.5.5, RFC 9111 section 4.1): which request fields a response
/// depends on, their values normalized so equivalent requests match.
enum Vary {
    /// The field names a `Vary` value lists, lower-cased; `*` kept.
    static func names(_ value: String?) -> [String] {
        HTTPFieldParsing.varyNames(value)
    }

    /// The standard credential fields (`CredentialPartitioning.standardHeaders`), lower-cased:
    /// an entry that varies on one keeps a digest of its value, never the value.
    static let credentialFields = Set(CredentialPartitioning.standardHeaders.map { $0.lowercased() })

    /// A request field's value as compared for `Vary`: list members trimmed; for the content
    /// negotiation fields (`Accept-*`), lower-cased without spaces, so `en, fr` matches `EN,fr`
    /// (never reordered: servers break ties between equal weights by the order, as RFC 9110
    /// section 12.5.4 notes, so `fr, en` is another request);
    /// for a credential field (`Cookie`, `Authorization`, ...), the SHA-256 digest of that, so
    /// no store ever holds the credential in clear.
    static func normalize(_ value: String, name: String) -> String {
        let members = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if name.hasPrefix("accept") {
            return members.map { $0.lowercased().replacingOccurrences(of: " ", with: "") }.joined(separator: ",")
        }
        let joined = members.joined(separator: ",")
        guard credentialFields.contains(name) else { return joined }
        return "sha256:" + SHA256.hex(Array((name + "\u{0}" + joined).utf8))
    }

    /// The request's values of the fields a response varies on, to store with the entry.
    static func values(names: [String], headers: RequestHeaders) -> [String: String] {
        var values: [String: String] = [:]
        for name in names where name != "*" {
            if let value = headers.value(name) { values[name] = normalize(value, name: name) }
        }
        return values
    }

    /// Whether a stored entry may answer a request, as far as `Vary` goes.
    static func matches(_ entry: CacheEntry, _ headers: RequestHeaders) -> Bool {
        let names = names(entry.header("Vary"))
        if names.contains("*") { return false }
        return names.allSatisfy { name in entry.varyValues[name] == headers.value(name).map { normalize($0, name: name) } }
    }

    /// A short name for one combination of values: a hash, so no value is stored in a key.
    static func variantName(names: [String], headers: RequestHeaders) -> String {
        variantName(names: names, values: values(names: names, headers: headers))
    }

    /// The variant name of normalized values, as `values(names:headers:)` makes them and an
    /// entry keeps them in `varyValues`: a stored entry names its own variant.
    static func variantName(names: [String], values: [String: String]) -> String {
        var text = ""
        for name in names.sorted() where name != "*" {
            text += name + "\u{0}" + (values[name] ?? "\u{1}") + "\u{0}"
        }
        return hexString(SHA256.hash(Array(text.utf8)).prefix(8))
    }

    /// The most variants one URL keeps: past it, the least recently stored is removed.
    static let maxVariantsPerURL = 8
}
