import Foundation

extension LoopbackOrigin {
    /// Counts the attempts on a route guarded by Basic authentication.
    public final class BasicAuthRoute: @unchecked Sendable {
        private let lock = NSLock()
        private var counts = (accepted: 0, rejected: 0)

        /// The `Authorization` value the route accepts: `Basic base64(user:password)`.
        public let expectedAuthorization: String

        init(expectedAuthorization: String) {
            self.expectedAuthorization = expectedAuthorization
        }

        /// Requests that carried the right credentials and got the protected response.
        public var accepted: Int { lock.withLock { counts.accepted } }

        /// Requests answered 401: no `Authorization`, or the wrong one.
        public var rejected: Int { lock.withLock { counts.rejected } }

        /// Every request the route received.
        public var attempts: Int { lock.withLock { counts.accepted + counts.rejected } }

        /// Whether a request carries the accepted credentials (scheme compared case-insensitively).
        func admits(_ request: Request) -> Bool {
            guard let value = request.header("Authorization") else { return false }
            let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, parts[0].lowercased() == "basic" else { return false }
            return "Basic " + parts[1].trimmingCharacters(in: .whitespaces) == expectedAuthorization
        }

        func record(accepted: Bool) {
            lock.withLock {
                if accepted { counts.accepted += 1 } else { counts.rejected += 1 }
            }
        }
    }

    /// Guards a path with Basic authentication (RFC 7617): a request without
    /// `Authorization: Basic base64(user:password)` gets `401` with
    /// `WWW-Authenticate: Basic realm="<realm>"` and a short text body; one with it gets what
    /// `handler` answers.
    /// - Parameters:
    ///   - path: the path, without query.
    ///   - user: the user name.
    ///   - password: the password.
    ///   - realm: the realm named in the challenge. The default is "loopback".
    ///   - handler: answers authorized requests; `hit` counts the path's requests, rejected
    ///     ones included.
    /// - Returns: the route's counters.
    @discardableResult
    public func routeBasicAuth(_ path: String, user: String, password: String, realm: String = "loopback",
                               _ handler: @escaping Handler) -> BasicAuthRoute {
        let credentials = Data("\(user):\(password)".utf8).base64EncodedString()
        let route = BasicAuthRoute(expectedAuthorization: "Basic \(credentials)")
        self.route(path) { request, hit in
            let admitted = route.admits(request)
            route.record(accepted: admitted)
            guard admitted else {
                return Response(status: 401, headers: [("WWW-Authenticate", "Basic realm=\"\(realm)\""),
                                                       ("Content-Type", "text/plain")], text: "unauthorized\n")
            }
            return handler(request, hit)
        }
        return route
    }

    /// Guards a path with Basic authentication and answers authorized requests with a fixed
    /// response; see `routeBasicAuth(_:user:password:realm:_:)`.
    /// - Returns: the route's counters.
    @discardableResult
    public func routeBasicAuth(_ path: String, user: String, password: String, realm: String = "loopback",
                               response: Response) -> BasicAuthRoute {
        routeBasicAuth(path, user: user, password: password, realm: realm) { _, _ in response }
    }

    /// Routes a path to a redirect.
    /// - Parameters:
    ///   - path: the path, without query.
    ///   - status: 301, 302, 303, 307 or 308 (any status is sent as given). The default is 302.
    ///   - location: the `Location` value, absolute (`origin.url("/b").absoluteString`) or
    ///     relative (`/b`, `b`), sent as given.
    ///   - cacheControl: a `Cache-Control` value for the redirect itself. The default is none.
    ///   - headers: more header fields.
    ///   - body: the redirect's own body. The default is a line naming the location.
    public func routeRedirect(_ path: String, status: Int = 302, to location: String, cacheControl: String? = nil,
                              headers: [(name: String, value: String)] = [], body: String? = nil) {
        var fields: [(name: String, value: String)] = [("Location", location), ("Content-Type", "text/plain")]
        if let cacheControl { fields.append(("Cache-Control", cacheControl)) }
        route(path, response: Response(status: status, headers: fields + headers, text: body ?? "redirecting to \(location)\n"))
    }
}
