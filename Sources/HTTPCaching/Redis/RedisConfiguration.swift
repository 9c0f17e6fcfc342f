import Foundation

/// Where a `RedisResponseStore` finds its server, how it talks to it, and how it stores entries.
///
/// Set the fields, or parse a URL: `redis://[user:password@]host:port[/db]` for one server,
/// `redis-cluster://[user:password@]host:port[,host:port...]` for a Redis Cluster,
/// `redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername` for a primary
/// watched by Redis Sentinel, and `rediss://` or `rediss-cluster://` for one server or a
/// cluster over TLS (see `RedisTLSOptions`; not with Sentinel).
public struct RedisConfiguration: Sendable, Equatable {
    /// The server's host name or address. The default is `localhost`.
    public var host: String
    /// The server's TCP port. The default is 6379.
    public var port: Int
    /// The ACL user to authenticate as; nil authenticates the default user with `password`
    /// alone. The default is nil.
    public var username: String?
    /// The password (`requirepass`, or the ACL user's); nil sends no `AUTH`. The default is nil.
    public var password: String?
    /// The database number (`SELECT`). The default is 0.
    public var database: Int
    /// Starts every key the store writes, so caches sharing a server keep apart; two stores
    /// with the same prefix share their entries, secret and refresh claims. The default is
    /// `http-cache:`.
    public var keyPrefix: String
    /// How long to wait for a TCP connection (and its `AUTH` and `SELECT`) before a call fails
    /// as unavailable. The default is 500 milliseconds.
    public var connectTimeout: TimeInterval
    /// How long one call may take to send its commands and read their replies, and how long
    /// it may wait for a free connection when all are busy, before it fails as unavailable.
    /// The default is 1 second.
    public var commandTimeout: TimeInterval
    /// After a failed connection, how long calls fail at once instead of trying again, so a
    /// server that is down costs callers nothing while it stays down. The default is 1 second.
    public var retryDelay: TimeInterval
    /// The most connections open at once; more callers wait for one. The default is 8.
    public var poolSize: Int
    /// The longest time to live an entry gets in Redis, and the one it gets when it has no
    /// known end of use. The default is 7 days.
    public var maximumTimeToLive: TimeInterval
    /// The largest entry stored (`CacheEntry.byteCount`). Redis itself refuses values over its
    /// `proto-max-bulk-len` (512 MB by default). The default is 8 MiB.
    public var maxEntrySize: Int
    /// Whether `host`:`port` is a node of a Redis Cluster. The store then learns from it (or
    /// from `clusterSeeds`) which primary serves which hash slot, sends each command to the
    /// primary of its key's slot, and keeps a pool of up to `poolSize` connections to each
    /// node, with the timeouts, retry delay and credentials above (set the same user and
    /// password on every node). The default is false: one server.
    public var isCluster: Bool
    /// More nodes of the cluster to learn its topology from when `host`:`port` does not
    /// answer; used only when `isCluster` is set. The default is none.
    public var clusterSeeds: [RedisNodeAddress]
    /// How to speak TLS to the server (every node of a cluster); nil speaks plain TCP. A
    /// `rediss://` or `rediss-cluster://` URL sets it; not supported with Sentinel. The default
    /// is nil.
    public var tls: RedisTLSOptions?
    /// The name Redis Sentinel knows the primary by (`sentinel monitor <name> ...`). When set,
    /// `host`:`port` (and `additionalSentinels`) are sentinels: the store asks them for the
    /// primary's address, checks that the node is a primary before using it, and asks again
    /// after a failure, following a failover. `username`, `password` and `database` are the
    /// data nodes'; the sentinels' are `sentinelUsername` and `sentinelPassword`. The default is
    /// nil: no Sentinel.
    public var sentinelMasterName: String?
    /// More sentinels to ask when `host`:`port` does not answer; used only with
    /// `sentinelMasterName`. The default is none.
    public var additionalSentinels: [RedisNodeAddress]
    /// The ACL user to authenticate to the sentinels as; nil authenticates with
    /// `sentinelPassword` alone. The default is nil.
    public var sentinelUsername: String?
    /// The sentinels' password (their `requirepass`, or `sentinelUsername`'s); nil sends the
    /// sentinels no `AUTH`. The data nodes' credentials are never sent to a sentinel. The
    /// default is nil.
    public var sentinelPassword: String?

    /// The key prefix used when none is given: `http-cache:`.
    public static let defaultKeyPrefix = "http-cache:"

    /// A configuration with the given parts; every argument has the default above.
    public init(host: String = "localhost", port: Int = 6379, username: String? = nil, password: String? = nil,
                database: Int = 0, keyPrefix: String = RedisConfiguration.defaultKeyPrefix,
                connectTimeout: TimeInterval = 0.5, commandTimeout: TimeInterval = 1, retryDelay: TimeInterval = 1,
                poolSize: Int = 8, maximumTimeToLive: TimeInterval = 7 * 86_400, maxEntrySize: Int = 8 << 20,
                isCluster: Bool = false, clusterSeeds: [RedisNodeAddress] = [], tls: RedisTLSOptions? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.keyPrefix = keyPrefix
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.retryDelay = retryDelay
        self.poolSize = poolSize
        self.maximumTimeToLive = maximumTimeToLive
        self.maxEntrySize = maxEntrySize
        self.isCluster = isCluster
        self.clusterSeeds = clusterSeeds
        self.tls = tls
        sentinelMasterName = nil
        additionalSentinels = []
        sentinelUsername = nil
        sentinelPassword = nil
    }

    /// A configuration from a URL, `redis://[user:password@]host[:port][/db]`, or for a Redis
    /// Cluster `redis-cluster://[user:password@]host[:port][,host[:port]...]` (the first node
    /// becomes `host`:`port`, the others `clusterSeeds`), or for Redis Sentinel
    /// `redis-sentinel://[user:password@]host[:port][,host[:port]...][/db]#mastername` (the
    /// sentinels; the first becomes `host`:`port`, the others `additionalSentinels`; the user
    /// and password are the data nodes'), with the other fields at their defaults. A port left
    /// out is 6379 (26379 for a sentinel). User and password may be percent-encoded;
    /// `redis://:secret@host` gives a password alone. `rediss://` and `rediss-cluster://` are
    /// the same over TLS (`tls`), and take options in the query, each a percent-encoded path:
    /// `cacert` (`RedisTLSOptions.caFile`), `cert` and `key` (the client certificate).
    /// - Throws: `HTTPCachingError.invalidURL` saying what is wrong with the URL.
    public init(url original: String, keyPrefix: String = RedisConfiguration.defaultKeyPrefix) throws(HTTPCachingError) {
        func invalid(_ reason: String) -> HTTPCachingError { .invalidURL("'\(Self.redacted(original))': \(reason)") }
        let (text, tls) = try Self.splitTLS(original, invalid)
        let lowered = text.lowercased()
        if lowered.hasPrefix("redis-cluster://") {
            self = try RedisConfiguration(clusterURL: text, keyPrefix: keyPrefix, invalid)
            self.tls = tls
            return
        }
        if lowered.hasPrefix("redis-sentinel://") {
            self = try RedisConfiguration(sentinelURL: text, keyPrefix: keyPrefix)
            return
        }
        guard lowered.hasPrefix("redis://") else {
            throw invalid("not a redis://, rediss://, redis-cluster://, rediss-cluster:// or redis-sentinel:// URL")
        }
        // The port is checked by hand first, for a clearer message than "not a valid URL".
        let authority = text.dropFirst(8).prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        let hostAndPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        var port = 6379
        if let colon = hostAndPort.lastIndex(of: ":"), !hostAndPort[colon...].contains("]") {
            let portText = hostAndPort[hostAndPort.index(after: colon)...]
            guard let given = Int(portText), portText.allSatisfy(\.isASCII), (1...65_535).contains(given) else {
                throw invalid("the port '\(portText)' is not a number between 1 and 65535")
            }
            port = given
        }
        guard let components = URLComponents(string: text) else { throw invalid("not a valid URL") }
        guard let host = components.host, !host.isEmpty else { throw invalid("no host") }
        guard components.query == nil, components.fragment == nil else { throw invalid("a query or fragment is not supported") }
        var database = 0
        let path = components.percentEncodedPath
        if !path.isEmpty && path != "/" {
            guard let number = Int(path.dropFirst()), number >= 0, path.first == "/" else {
                throw invalid("the database '\(path.dropFirst())' is not a number of at least 0")
            }
            database = number
        }
        let user = components.user.flatMap { $0.isEmpty ? nil : $0 }
        let password = components.password
        if user != nil && password == nil { throw invalid("a user without a password (write redis://user:password@host)") }
        self.init(host: host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host,
                  port: port, username: user, password: password, database: database, keyPrefix: keyPrefix, tls: tls)
    }

    /// Checks every field.
    /// - Throws: `HTTPCachingError.invalidValue` naming the first field out of range.
    public func validate() throws(HTTPCachingError) {
        func check(_ condition: Bool, _ message: String) throws(HTTPCachingError) {
            if !condition { throw .invalidValue(message) }
        }
        try check(!host.isEmpty, "the host is empty")
        try check((1...65_535).contains(port), "the port \(port) is not between 1 and 65535")
        try check(username == nil || password != nil, "a username without a password")
        try check(database >= 0, "the database \(database) is negative")
        try check(!keyPrefix.isEmpty, "the key prefix is empty")
        try check(connectTimeout > 0 && connectTimeout.isFinite, "connectTimeout \(connectTimeout) is not a positive number of seconds")
        try check(commandTimeout > 0 && commandTimeout.isFinite, "commandTimeout \(commandTimeout) is not a positive number of seconds")
        try check(retryDelay >= 0 && retryDelay.isFinite, "retryDelay \(retryDelay) is negative")
        try check(poolSize >= 1, "poolSize \(poolSize) is less than 1")
        try check(maximumTimeToLive >= 0.001 && maximumTimeToLive.isFinite,
                  "maximumTimeToLive \(maximumTimeToLive) is not a positive number of seconds")
        try check(maxEntrySize >= 0, "maxEntrySize \(maxEntrySize) is negative")
        try validateCluster()
        try tls?.validate()
        try validateSentinel()
        try check(tls == nil || sentinelMasterName == nil, "TLS with Redis Sentinel is not supported")
    }

    /// The URL with any password replaced by `***`, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@"), let schemeEnd = text.range(of: "://")?.upperBound, schemeEnd <= at else { return text }
        let userinfo = text[schemeEnd..<at]
        guard let colon = userinfo.firstIndex(of: ":") else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }
}

