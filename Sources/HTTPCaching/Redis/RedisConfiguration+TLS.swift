import Foundation

/// How a `RedisResponseStore` speaks TLS to Redis (`RedisConfiguration.tls`, or a `rediss://`
/// URL): which certificates it trusts, and the client certificate it shows, if any.
///
/// TLS uses the system's OpenSSL 3 (`libssl.so.3` and `libcrypto.so.3`, loaded at run time,
/// the libraries FoundationNetworking's libcurl already links); where it cannot be loaded,
/// making the store throws, naming the package to install (`libssl3`). The server's certificate
/// is verified by default: signed by a trusted CA, and issued for the configured host (a name,
/// or an IP address in its subjectAltName). TLS 1.2 is the oldest version accepted.
public struct RedisTLSOptions: Sendable, Equatable {
    /// A PEM file of the CA certificates to trust, instead of the system's (a private CA, or a
    /// managed service's own); nil trusts the system's CA certificates. The default is nil.
    public var caFile: String?
    /// A PEM file with the client certificate (and any intermediates) to show a server that
    /// asks for one (`tls-auth-clients yes`); nil shows none. The default is nil.
    public var certificateFile: String?
    /// A PEM file with the client certificate's private key; nil reads it from
    /// `certificateFile`. The default is nil.
    public var keyFile: String?
    /// Accepts any certificate the server shows, for any name: the connection is encrypted but
    /// anyone on the path can pose as the server and read or change the cache. Only for a
    /// server whose self-signed certificate you cannot get; prefer `caFile`. The default is
    /// false: the certificate is verified.
    public var allowsUntrustedCertificates: Bool

    /// Options with the given parts; every argument has the default above.
    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
                allowsUntrustedCertificates: Bool = false) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.allowsUntrustedCertificates = allowsUntrustedCertificates
    }

    /// Whether OpenSSL 3 (`libssl.so.3`, `libcrypto.so.3`) can be loaded on this system, so
    /// that TLS to Redis can work.
    public static var isAvailable: Bool {
        if case .success = OpenSSL.loaded { return true }
        return false
    }

    /// The options in a `rediss://` URL's query: `cacert`, `cert` and `key`, each a
    /// percent-encoded path, as redis-cli names them.
    /// - Throws: `HTTPCachingError.invalidURL` (through `invalid`) for an unknown or empty option.
    init(query: Substring, _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError) {
        self.init()
        for item in query.split(separator: "&") {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard parts.count == 2, !parts[1].isEmpty else { throw invalid("the option '\(name)' has no value") }
            // Percent-encoding only: a '+' is a '+', as paths have it.
            let value = String(parts[1]).removingPercentEncoding ?? String(parts[1])
            switch name {
            case "cacert": caFile = value
            case "cert": certificateFile = value
            case "key": keyFile = value
            default: throw invalid("unknown option '\(name)' (rediss:// takes cacert=, cert= and key=, each a file path)")
            }
        }
    }

    /// Checks the fields.
    /// - Throws: `HTTPCachingError.invalidValue` naming the first field out of range.
    func validate() throws(HTTPCachingError) {
        for (name, value) in [("caFile", caFile), ("certificateFile", certificateFile), ("keyFile", keyFile)] where value?.isEmpty == true {
            throw .invalidValue("tls.\(name) is empty")
        }
        if keyFile != nil && certificateFile == nil { throw .invalidValue("tls.keyFile is set without tls.certificateFile") }
        if allowsUntrustedCertificates && caFile != nil {
            throw .invalidValue("tls.caFile is set but tls.allowsUntrustedCertificates makes it unused")
        }
    }
}

extension RedisConfiguration {
    /// A `rediss://` or `rediss-cluster://` URL's scheme made plain, its query read as TLS
    /// options; any other URL as it is, with no options.
    /// - Throws: `HTTPCachingError.invalidURL` (through `invalid`) for a bad option.
    static func splitTLS(_ text: String, _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError) -> (plain: String, tls: RedisTLSOptions?) {
        let lowered = text.lowercased()
        let scheme = ["rediss://", "rediss-cluster://"].first { lowered.hasPrefix($0) }
        guard let scheme else { return (text, nil) }
        guard !text.contains("#") else { throw invalid("a fragment is not supported") }
        let plainScheme = scheme == "rediss://" ? "redis://" : "redis-cluster://"
        let rest = text.dropFirst(scheme.count)
        let query = rest.firstIndex(of: "?").map { rest[rest.index(after: $0)...] } ?? ""
        let options = try RedisTLSOptions(query: query, invalid)
        return (plainScheme + rest.prefix { $0 != "?" }, options)
    }
}
