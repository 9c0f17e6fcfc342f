import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which request a redirect leads to, by the rules Foundation's own HTTP class applies on
/// Linux (swift-corelibs-foundation's `_HTTPURLProtocol.redirectRequest`), so a caching
/// session follows exactly what a plain one would.
enum Redirects {
    /// The request a 3xx leads to; nil if it does not redirect (not 301, 302, 303, 305, 307
    /// or 308, or no usable `Location`).
    static func request(after response: ResponseHead, from request: URLRequest) -> URLRequest? {
        guard let location = response.header("Location"), let target = URL(string: location) else { return nil }
        var next = request
        switch response.statusCode {
        case 301...302 where next.httpMethod?.uppercased() == "POST", 303:
            // POST becomes GET; other methods are kept (but for 303).
            next.httpMethod = "GET"
            next.httpBody = nil
        case 301...302, 305...308:
            break
        default:
            return nil
        }
        if target.scheme != nil && target.host != nil {
            next.url = target
            return next
        }
        guard let from = request.url, var components = URLComponents(url: from, resolvingAgainstBaseURL: false) else { return nil }
        if target.host != nil {
            components.host = target.host
            components.port = target.port
        }
        components.path = target.path.hasPrefix("/") ? target.path : "/" + target.path
        components.percentEncodedQuery = target.query
        components.percentEncodedFragment = target.fragment
        guard let url = components.url else { return nil }
        next.url = url
        return next
    }
}

/// The first challenge of a `WWW-Authenticate` field: its scheme and realm.
enum Challenges {
    struct Challenge: Equatable {
        /// Foundation's name for the scheme (`NSURLAuthenticationMethodHTTPBasic`, ...).
        let method: String
        let realm: String?
    }

    /// The credential a storage holds for a protection space, chosen as Foundation chooses
    /// (the first user name in order, else the default credential), with spaces compared by
    /// value: on Linux `URLProtectionSpace` compares by identity, so a credential stored for a
    /// space the caller built would otherwise never be found.
    static func storedCredential(in storage: URLCredentialStorage, for space: URLProtectionSpace) -> URLCredential? {
        if let credentials = storage.credentials(for: space), let user = credentials.keys.sorted().first {
            return credentials[user]
        }
        if let credential = storage.defaultCredential(for: space) { return credential }
        var found: [String: URLCredential] = [:]
        for (stored, credentials) in storage.allCredentials where sameSpace(stored, space) {
            found.merge(credentials) { first, _ in first }
        }
        return found.keys.sorted().first.flatMap { found[$0] }
    }

    /// Whether two protection spaces name the same host, port, scheme, realm and method.
    static func sameSpace(_ a: URLProtectionSpace, _ b: URLProtectionSpace) -> Bool {
        a.host.lowercased() == b.host.lowercased() && a.port == b.port
            && a.protocol?.lowercased() == b.protocol?.lowercased() && a.realm == b.realm
            && a.authenticationMethod == b.authenticationMethod && a.isProxy() == b.isProxy()
    }

    /// The first challenge in a `WWW-Authenticate` value; nil if there is none.
    static func parse(_ value: String?) -> Challenge? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        let scheme = value.prefix { $0 != " " && $0 != "," }
        guard !scheme.isEmpty else { return nil }
        let method: String
        switch scheme.lowercased() {
        case "basic": method = NSURLAuthenticationMethodHTTPBasic
        case "digest": method = NSURLAuthenticationMethodHTTPDigest
        default: method = NSURLAuthenticationMethodDefault
        }
        var realm: String?
        if let range = value.range(of: "realm=", options: .caseInsensitive) {
            var rest = value[range.upperBound...]
            if rest.first == "\"" {
                rest = rest.dropFirst()
                realm = String(rest.prefix { $0 != "\"" })
            } else {
                realm = String(rest.prefix { $0 != "," && $0 != " " })
            }
        }
        return Challenge(method: method, realm: realm)
    }
}
