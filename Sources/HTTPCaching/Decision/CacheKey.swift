import Foundation

/// What an entry is stored under: the method plus the normalized URL, query included.
///
/// Normalizing lower-cases the scheme and host, drops the default port (80 for http, 443
/// for https) and the fragment, and writes an empty path as `/`. The query is kept as
/// sent, so `/items?page=1` and `/items?page=2` are different entries.
public struct CacheKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The request method, upper-cased.
    public var method: String
    /// The normalized URL.
    public var url: String

    /// The key of a method and URL.
    public init(method: String = "GET", url: URL) {
        self.method = method.uppercased()
        self.url = Self.normalize(url)
    }

    /// A key from its parts, taken as they are (no normalization).
    public init(method: String, normalizedURL: String) {
        self.method = method
        self.url = normalizedURL
    }

    public var description: String { "\(method) \(url)" }

    /// Orders keys by URL, then method.
    public static func < (lhs: CacheKey, rhs: CacheKey) -> Bool {
        (lhs.url, lhs.method) < (rhs.url, rhs.method)
    }

    /// The same key without the named query items, for example a cache-busting timestamp.
    public func removingQueryItems(named names: Set<String>) -> CacheKey {
        guard var components = URLComponents(string: url), let items = components.percentEncodedQueryItems else {
            return self
        }
        let kept = items.filter { !names.contains($0.name) }
        components.percentEncodedQueryItems = kept.isEmpty ? nil : kept
        return CacheKey(method: method, normalizedURL: components.string ?? url)
    }

    static func normalize(_ url: URL) -> String {
        let string = url.absoluteString
        if isNormalized(string) { return string }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        let scheme = components.scheme?.lowercased()
        components.scheme = scheme
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443) {
            components.port = nil
        }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        components.fragment = nil
        return components.string ?? url.absoluteString
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
        return !bytes[index...].contains(UInt8(ascii: "#"))
    }
}
