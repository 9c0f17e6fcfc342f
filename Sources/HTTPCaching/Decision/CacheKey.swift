import Foundation

/// What an entry is stored under: the method and normalized URL, plus the credential
/// partition, the `Vary` variant and the cache's namespace when there are any.
///
/// Normalizing lower-cases the scheme and host, drops userinfo, the default port (80 for
/// http, 443 for https) and the fragment, and writes an empty path as `/`. The query is kept
/// as sent, so `/items?page=1` and `/items?page=2` are different entries. Userinfo joins the
/// credential partition instead of the URL, so no password is ever stored in a key.
public struct CacheKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The request method as sent (GET, HEAD, POST, PUT, DELETE and CONNECT in capitals, as
    /// Foundation writes them; any other as given: methods are case-sensitive).
    public var method: String
    /// The normalized URL.
    public var url: String
    /// The credentials the response was fetched with, as a keyed hash; nil without any.
    public var partition: CredentialPartition?
    /// Which combination of the request header values a response's `Vary` names this entry
    /// answers; nil for the entry stored under the URL itself.
    public var variant: String?
    /// The cache's namespace (`CacheConfiguration.namespace`): entries of another namespace
    /// are never found. The default is empty.
    public var namespace: String

    /// The key of a method and URL; the method as Foundation sends it (see `method`).
    public init(method: String = "GET", url: URL) {
        self.method = RequestMethod.normalized(method)
        self.url = Self.normalize(url)
        partition = nil
        variant = nil
        namespace = ""
    }

    /// A key from its parts, taken as they are (no normalization).
    public init(method: String, normalizedURL: String, partition: CredentialPartition? = nil,
                variant: String? = nil, namespace: String = "") {
        self.method = method
        self.url = normalizedURL
        self.partition = partition
        self.variant = variant
        self.namespace = namespace
    }

    /// The method and URL, with markers for a partition and a variant (never their values).
    public var description: String {
        var text = "\(method) \(url)"
        if partition != nil { text += " [credentials]" }
        if let variant { text += " [variant \(variant)]" }
        if !namespace.isEmpty { text += " [namespace \(namespace)]" }
        return text
    }

    /// Orders keys by URL, then method, then the rest of their stored form.
    public static func < (lhs: CacheKey, rhs: CacheKey) -> Bool {
        (lhs.url, lhs.method, lhs.storageString) < (rhs.url, rhs.method, rhs.storageString)
    }

    /// The same key without the named query items, for example a cache-busting timestamp.
    public func removingQueryItems(named names: Set<String>) -> CacheKey {
        guard var components = URLComponents(string: url), let items = components.percentEncodedQueryItems else {
            return self
        }
        let kept = items.filter { !names.contains($0.name) }
        components.percentEncodedQueryItems = kept.isEmpty ? nil : kept
        var key = self
        key.url = components.string ?? url
        return key
    }

    /// The same key for the entry stored under the URL itself (no variant).
    public var primary: CacheKey {
        var key = self
        key.variant = nil
        return key
    }

    // MARK: - Stored form

    /// Every part of the key in one unambiguous string, for stores that persist keys: store
    /// it with the entry and compare it on read. Each part is written as its UTF-8 length, a
    /// colon and the part itself.
    public var storageString: String {
        var text = "k1|"
        for part in [namespace, method, url, partition?.rawValue ?? "", variant ?? ""] {
            text += "\(part.utf8.count):"
            text += part
        }
        return text
    }

    /// The key a `storageString` was made from; nil if the text is not one.
    public init?(storageString text: String) {
        // Bytes, not characters: a part may begin with a combining mark, which would join the
        // colon before it into one character.
        var rest = Substring(text).utf8
        guard rest.starts(with: "k1|".utf8) else { return nil }
        rest = rest.dropFirst(3)
        var parts: [String] = []
        for _ in 0..<5 {
            guard let colon = rest.firstIndex(of: UInt8(ascii: ":")), let digits = String(rest[rest.startIndex..<colon]),
                  let length = Int(digits), length >= 0 else { return nil }
            let value = rest[rest.index(after: colon)...]
            guard value.count >= length else { return nil }
            let end = value.index(value.startIndex, offsetBy: length)
            guard let part = String(value[value.startIndex..<end]) else { return nil }
            parts.append(part)
            rest = value[end...]
        }
        guard rest.isEmpty, !parts[1].isEmpty else { return nil }
        self.init(method: parts[1], normalizedURL: parts[2],
                  partition: parts[3].isEmpty ? nil : CredentialPartition(rawValue: parts[3]),
                  variant: parts[4].isEmpty ? nil : parts[4], namespace: parts[0])
    }

    // MARK: - Normalizing

    static func normalize(_ url: URL) -> String {
        let string = url.absoluteString
        if isNormalized(string) { return string }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        let scheme = components.scheme?.lowercased()
        components.scheme = scheme
        components.percentEncodedUser = nil
        components.percentEncodedPassword = nil
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443) {
            components.port = nil
        }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        components.fragment = nil
        return components.string ?? url.absoluteString
    }

    /// The URL without its userinfo (`user:password@`), as an entry stores it: the userinfo
    /// joins the credential partition, never the store. The URL itself when it has none.
    static func removingUserinfo(_ url: URL) -> URL {
        guard url.absoluteString.utf8.contains(UInt8(ascii: "@")),
              var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
              components.percentEncodedUser != nil || components.percentEncodedPassword != nil else { return url }
        components.percentEncodedUser = nil
        components.percentEncodedPassword = nil
        return components.url ?? URL(string: normalize(url)) ?? URL(fileURLWithPath: "/")
    }

    /// The userinfo of a URL (`user:password`), which the key leaves out; nil without any.
    static func userinfo(of url: URL) -> String? {
        guard url.absoluteString.utf8.contains(UInt8(ascii: "@")),
              let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
              components.percentEncodedUser != nil || components.percentEncodedPassword != nil else { return nil }
        return "\(components.percentEncodedUser ?? ""):\(components.percentEncodedPassword ?? "")"
    }

    /// Whether a URL string is already in normal form, so parsing it can be skipped (the
    /// common case, on every request's path): `http://` or `https://`, a host in lower case
    /// without userinfo or a default port, a path, no fragment.
    static func isNormalized(_ string: String) -> Bool {
        let bytes = string.utf8
        let schemeLength: Int
        if bytes.starts(with: "http://".utf8) { schemeLength = 7 }
        else if bytes.starts(with: "https://".utf8) { schemeLength = 8 }
        else { return false }
        var index = bytes.index(bytes.startIndex, offsetBy: schemeLength)
        var authority: [UInt8] = []
        while index != bytes.endIndex, bytes[index] != UInt8(ascii: "/") {
            let byte = bytes[index]
            // Upper case, userinfo, IPv6 brackets, a query or fragment before any path: take the slow path.
            if (byte >= 65 && byte <= 90) || byte == UInt8(ascii: "@") || byte == UInt8(ascii: "[")
                || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: "%") { return false }
            authority.append(byte)
            index = bytes.index(after: index)
        }
        guard index != bytes.endIndex, !authority.isEmpty else { return false } // no path
        let defaultPort = schemeLength == 7 ? Array(":80".utf8) : Array(":443".utf8)
        if authority.count > defaultPort.count && Array(authority.suffix(defaultPort.count)) == defaultPort { return false }
        // An empty port, or one with leading zeros (`:080` is port 80): parsing rewrites both.
        if let colon = authority.lastIndex(of: UInt8(ascii: ":")) {
            let port = authority[(colon + 1)...]
            if port.isEmpty || (port.count > 1 && port.first == UInt8(ascii: "0")) { return false }
        }
        return !bytes[index...].contains(UInt8(ascii: "#"))
    }
}

/// The credentials a request carried, as a keyed hash (HMAC-SHA-256 with the store's own
/// secret), so entries of different users never answer each other and the values cannot be
/// recovered from the store.
public struct CredentialPartition: Hashable, Sendable, CustomStringConvertible {
    /// The hash, as 32 hexadecimal digits.
    public let rawValue: String

    /// A partition from its hash.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `credentials`: the value itself is never printed.
    public var description: String { "credentials" }
}
