import Foundation

extension RedisConfiguration {
    /// The port a sentinel listens on when a `redis-sentinel://` URL names none: 26379.
    static let defaultSentinelPort = 26_379

    /// Whether the primary is found through Redis Sentinel (`sentinelMasterName` is set).
    var isSentinel: Bool { sentinelMasterName != nil }

    /// The sentinels, in the order first asked: `host`:`port`, then `additionalSentinels`.
    var sentinelNodes: [RedisNodeAddress] {
        var seen = Set<RedisNodeAddress>()
        return ([RedisNodeAddress(host: host, port: port)] + additionalSentinels).filter { seen.insert($0).inserted }
    }

    /// This configuration for talking to one sentinel: its address and the sentinels'
    /// credentials, database 0, two connections; the timeouts and retry delay the same.
    func forSentinel(_ node: RedisNodeAddress) -> RedisConfiguration {
        var configuration = RedisConfiguration(host: node.host, port: node.port, username: sentinelUsername,
                                               password: sentinelPassword, keyPrefix: keyPrefix)
        configuration.connectTimeout = connectTimeout
        configuration.commandTimeout = commandTimeout
        configuration.retryDelay = retryDelay
        configuration.poolSize = 2
        return configuration
    }

    /// This configuration for the primary the sentinels named: its address, the data nodes'
    /// credentials and database, no sentinel fields.
    func forPrimary(_ node: RedisNodeAddress) -> RedisConfiguration {
        var configuration = self
        configuration.host = node.host
        configuration.port = node.port
        configuration.sentinelMasterName = nil
        configuration.additionalSentinels = []
        configuration.sentinelUsername = nil
        configuration.sentinelPassword = nil
        return configuration
    }

    /// A configuration from `redis-sentinel://[user:password@]host[:port][,host[:port]...][/db]#mastername`:
    /// the first sentinel becomes `host`:`port`, the others `additionalSentinels`; a port left
    /// out is 26379. The user and password are the data nodes' (the primary's); the sentinels'
    /// own are set with `sentinelUsername` and `sentinelPassword`.
    /// - Throws: `HTTPCachingError.invalidURL` saying what is wrong with the URL.
    init(sentinelURL text: String, keyPrefix: String) throws(HTTPCachingError) {
        func invalid(_ reason: String) -> HTTPCachingError { .invalidURL("'\(Self.redacted(text))': \(reason)") }
        var rest = text.dropFirst("redis-sentinel://".count)
        guard let hash = rest.lastIndex(of: "#") else {
            throw invalid("no master name (write redis-sentinel://host:port#mastername)")
        }
        let nameText = rest[rest.index(after: hash)...]
        let name = nameText.removingPercentEncoding ?? String(nameText)
        guard !name.isEmpty else { throw invalid("the master name after '#' is empty") }
        rest = rest[..<hash]
        guard !rest.contains("?") else { throw invalid("a query is not supported") }
        let authority = rest.prefix { $0 != "/" }
        let path = rest[authority.endIndex...]
        var database = 0
        if !path.isEmpty && path != "/" {
            guard let number = Int(path.dropFirst()), number >= 0 else {
                throw invalid("the database '\(path.dropFirst())' is not a number of at least 0")
            }
            database = number
        }
        let (username, password, nodes) = try Self.credentialsAndNodes(authority, defaultPort: Self.defaultSentinelPort,
                                                                       scheme: "redis-sentinel", invalid)
        self.init(host: nodes[0].host, port: nodes[0].port, username: username, password: password, database: database,
                  keyPrefix: keyPrefix)
        sentinelMasterName = name
        additionalSentinels = Array(nodes.dropFirst())
    }

    /// Checks the sentinel fields.
    /// - Throws: `HTTPCachingError.invalidValue` naming the first field out of range.
    func validateSentinel() throws(HTTPCachingError) {
        guard let name = sentinelMasterName else {
            guard additionalSentinels.isEmpty else { throw .invalidValue("additionalSentinels are set but sentinelMasterName is nil") }
            return
        }
        guard !name.isEmpty else { throw .invalidValue("the sentinel master name is empty") }
        guard !isCluster else { throw .invalidValue("isCluster and sentinelMasterName are both set: a store uses one or the other") }
        guard sentinelUsername == nil || sentinelPassword != nil else { throw .invalidValue("a sentinelUsername without a sentinelPassword") }
        for sentinel in additionalSentinels {
            guard !sentinel.host.isEmpty else { throw .invalidValue("a sentinel's host is empty") }
            guard (1...65_535).contains(sentinel.port) else { throw .invalidValue("the sentinel port \(sentinel.port) is not between 1 and 65535") }
        }
    }
}
