import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The HTTP authentication challenges Foundation's own HTTP class raises, found exactly as it
/// finds them, so a caching session raises the same ones and no other.
///
/// swift-corelibs-foundation 6.3.1 (`URLProtectionSpace.create(with:)` and
/// `_HTTPURLProtocol._HTTPMessage._Challenge.challenges(from:)`) starts a challenge for a 401
/// only when its `WWW-Authenticate` value holds a `Basic` challenge with a `realm` parameter,
/// found by an eager search that restarts after every comma; every other 401 (Bearer,
/// Negotiate, Digest, an unknown scheme, a Basic challenge without a realm) reaches the caller
/// as it is, with no challenge.
enum Challenges {
    struct Challenge: Equatable {
        /// Foundation's name for the scheme: always `NSURLAuthenticationMethodHTTPBasic`.
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

    /// The challenge Foundation would raise for a response with this `WWW-Authenticate`
    /// value; nil if it would raise none.
    static func parse(_ value: String?) -> Challenge? {
        guard let value else { return nil }
        var view = value.unicodeScalars[...]
        while !view.isEmpty {
            guard let scheme = view.tokenPrefix else { break }
            if String(view[scheme]).caseInsensitiveCompare("basic") == .orderedSame {
                let parameters = Self.parameters(view[scheme.upperBound...])
                if let realm = parameters.first(where: { $0.name.caseInsensitiveCompare("realm") == .orderedSame }) {
                    return Challenge(method: NSURLAuthenticationMethodHTTPBasic, realm: realm.value)
                }
            }
            guard let comma = view.firstIndex(of: ",") else { break }
            view = view[view.index(after: comma)...].trimmingSpaces
        }
        return nil
    }

    /// `auth-param`s as Foundation reads them: name, optional whitespace, `=`, a token or a
    /// quoted string, separated by commas; reading stops at the first that does not parse.
    private static func parameters(_ text: Substring.UnicodeScalarView) -> [(name: String, value: String)] {
        var view = text
        var found: [(name: String, value: String)] = []
        while true {
            view = view.trimmingSpaces
            guard let name = view.tokenPrefix else { break }
            let parameterName = String(view[name])
            view = view[name.upperBound...].trimmingSpacesAndTabs
            guard view.first == "=" else { break }
            view = view.dropFirst().trimmingSpacesAndTabs
            guard let (value, rest) = view.parameterValue else { break }
            found.append((parameterName, value))
            view = rest.trimmingSpaces
            guard view.first == "," else { break }
            view = view.dropFirst()
        }
        return found
    }
}

private extension Substring.UnicodeScalarView {
    /// The range of RFC 2616 token characters at the start; nil if there are none.
    var tokenPrefix: Range<Index>? {
        let end = firstIndex { !$0.isToken } ?? endIndex
        return end == startIndex ? nil : startIndex..<end
    }

    var trimmingSpaces: Self { self[(firstIndex { $0 != " " } ?? endIndex)...] }

    var trimmingSpacesAndTabs: Self { self[(firstIndex { $0 != " " && $0 != "\t" } ?? endIndex)...] }

    /// A token, or a quoted string (unescaped), at the start, and what follows it.
    var parameterValue: (String, Self)? {
        if first == "\"" {
            var value = String.UnicodeScalarView()
            var index = self.index(after: startIndex)
            var escaped = false
            while index < endIndex {
                let scalar = self[index]
                if scalar == "\\" && !escaped {
                    escaped = true
                } else if escaped {
                    guard scalar == "\t" || scalar == " " || (0x21...0x7E).contains(scalar.value) || (0x80...0xFF).contains(scalar.value) else {
                        return nil
                    }
                    escaped = false
                    value.append(scalar)
                } else if scalar == "\"" {
                    return (String(value), self[self.index(after: index)...])
                } else {
                    guard scalar.isQuotedText else { return nil }
                    value.append(scalar)
                }
                index = self.index(after: index)
            }
            return nil
        }
        guard let token = tokenPrefix else { return nil }
        return (String(self[token]), self[token.upperBound...])
    }
}

private extension Unicode.Scalar {
    /// A token character (RFC 2616): visible ASCII but the separators.
    var isToken: Bool {
        (32...126).contains(value) && !"()<>@,;:\\\"/[]?={} \t".unicodeScalars.contains(self)
    }

    /// `qdtext` (RFC 7230 section 3.2.6).
    var isQuotedText: Bool {
        self == "\t" || self == " " || value == 0x21 || (0x23...0x5B).contains(value) || (0x5D...0x7E).contains(value)
            || (0x80...0xFF).contains(value)
    }
}
