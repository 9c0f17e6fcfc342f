import Foundation

/// A Redis server's host and TCP port: a node of a Redis Cluster.
public struct RedisNodeAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address.
    public var host: String
    /// The TCP port.
    public var port: Int

    /// An address from its parts.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension RedisConfiguration {
    /// The nodes the store learns a cluster's topology from, in the order tried: `host`:`port`,
    /// then `clusterSeeds`.
    var seedNodes: [RedisNodeAddress] {
        var seen = Set<RedisNodeAddress>()
        return ([RedisNodeAddress(host: host, port: port)] + clusterSeeds).filter { seen.insert($0).inserted }
    }

    /// This configuration for one node of the cluster: its host and port, everything else the same.
    func forNode(_ node: RedisNodeAddress) -> RedisConfiguration {
        var configuration = self
        configuration.host = node.host
        configuration.port = node.port
        configuration.clusterSeeds = []
        return configuration
    }

    /// A configuration from `redis-cluster://[user:password@]host[:port][,host[:port]...]`: the
    /// first node becomes `host`:`port`, the others `clusterSeeds`; a port left out is 6379.
    /// - Throws: `HTTPCachingError.invalidURL` saying what is wrong with the URL.
    init(clusterURL text: String, keyPrefix: String, _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError) {
        let rest = text.dropFirst("redis-cluster://".count)
        guard !rest.contains("?") && !rest.contains("#") else { throw invalid("a query or fragment is not supported") }
        let authority = rest.prefix { $0 != "/" }
        let path = rest[authority.endIndex...]
        guard path.isEmpty || path == "/" || path == "/0" else {
            throw invalid("a cluster has only database 0, not '\(path.dropFirst())'")
        }
        let (username, password, nodes) = try Self.credentialsAndNodes(authority, defaultPort: 6379, scheme: "redis-cluster", invalid)
        self.init(host: nodes[0].host, port: nodes[0].port, username: username, password: password, keyPrefix: keyPrefix,
                  isCluster: true, clusterSeeds: Array(nodes.dropFirst()))
    }

    /// The user, password and nodes of `[user:password@]host[:port][,host[:port]...]`, the
    /// authority of a cluster or sentinel URL.
    /// - Throws: `HTTPCachingError.invalidURL` for a user without a password or a bad node.
    static func credentialsAndNodes(_ authority: Substring, defaultPort: Int, scheme: String,
                                    _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError)
        -> (username: String?, password: String?, nodes: [RedisNodeAddress]) {
        var username: String?, password: String?
        var nodesText = authority
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            nodesText = authority[authority.index(after: at)...]
            let colon = userinfo.firstIndex(of: ":")
            let user = colon.map { userinfo[..<$0] } ?? userinfo
            username = user.isEmpty ? nil : user.removingPercentEncoding ?? String(user)
            password = colon.map { userinfo[userinfo.index(after: $0)...] }.map { $0.removingPercentEncoding ?? String($0) }
            if username != nil && password == nil {
                throw invalid("a user without a password (write \(scheme)://user:password@host:port)")
            }
        }
        var nodes: [RedisNodeAddress] = []
        for item in nodesText.split(separator: ",", omittingEmptySubsequences: false) {
            nodes.append(try node(item, defaultPort: defaultPort, invalid))
        }
        return (username, password, nodes)
    }

    /// One `host[:port]` of a cluster or sentinel URL (an IPv6 address in brackets).
    private static func node(_ text: Substring, defaultPort: Int,
                             _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError) -> RedisNodeAddress {
        var host = text, port = defaultPort
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw invalid("an IPv6 address without its ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("'\(text)' is not host:port") }
                port = try portNumber(after.dropFirst(), invalid)
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            port = try portNumber(text[text.index(after: colon)...], invalid)
        }
        guard !host.isEmpty else { throw invalid("no host in '\(text)'") }
        return RedisNodeAddress(host: host.lowercased(), port: port)
    }

    private static func portNumber(_ text: Substring, _ invalid: (String) -> HTTPCachingError) throws(HTTPCachingError) -> Int {
        guard let port = Int(text), text.allSatisfy(\.isASCII), (1...65_535).contains(port) else {
            throw invalid("the port '\(text)' is not a number between 1 and 65535")
        }
        return port
    }

    /// Checks the cluster fields.
    /// - Throws: `HTTPCachingError.invalidValue` naming the first field out of range.
    func validateCluster() throws(HTTPCachingError) {
        if !isCluster {
            guard clusterSeeds.isEmpty else { throw .invalidValue("clusterSeeds are set but isCluster is false") }
            return
        }
        guard database == 0 else { throw .invalidValue("the database \(database) is not 0: a cluster has only database 0") }
        for seed in clusterSeeds {
            guard !seed.host.isEmpty else { throw .invalidValue("a cluster seed's host is empty") }
            guard (1...65_535).contains(seed.port) else { throw .invalidValue("the cluster seed port \(seed.port) is not between 1 and 65535") }
        }
    }
}
