import Synchronization

/// Where a `RedisResponseStore`'s commands go: one server's connection pool, a Redis
/// Cluster's router, or the primary Redis Sentinel names. A single server's calls go straight
/// to its pool, as they always did.
enum RedisBackend: Sendable {
    case server(RedisConnectionPool)
    case cluster(RedisClusterRouter)
    case sentinel(RedisSentinelRouter)

    /// Sends commands on one key (or keys of one hash tag), pipelined; on a cluster, to the
    /// primary serving the key's slot.
    /// - Throws: `RedisClientError` when the replies do not arrive.
    func execute(_ commands: [RedisCommand], key: [UInt8]) throws(RedisClientError) -> [RESPValue] {
        switch self {
        case .server(let pool): try pool.execute(commands)
        case .cluster(let router): try router.execute(commands, slot: RedisClusterSlot.of(key))
        case .sentinel(let router): try router.execute(commands)
        }
    }

    /// Sends one command on a key and returns its reply.
    /// - Throws: `RedisClientError` when the reply does not arrive.
    func execute(_ command: RedisCommand, key: [UInt8]) throws(RedisClientError) -> RESPValue {
        try execute([command], key: key)[0]
    }

    /// Sends one command for each key (`commands[i]` on `keys[i]`), pipelined: all at once to a
    /// server, to each primary its own on a cluster. The replies are in the commands' order.
    /// - Throws: `RedisClientError` when the replies do not arrive.
    func executeEach(_ commands: [RedisCommand], keys: [[UInt8]]) throws(RedisClientError) -> [RESPValue] {
        switch self {
        case .server(let pool): try pool.execute(commands)
        case .cluster(let router): try router.executeEach(commands, slots: keys.map(RedisClusterSlot.of))
        case .sentinel(let router): try router.execute(commands)
        }
    }

    /// Removes keys: one `UNLINK` on a server; on a cluster one for each key (keys of
    /// different slots cannot share a command), pipelined to each primary.
    /// - Returns: the first error reply's message, nil when every removal was taken.
    /// - Throws: `RedisClientError` when the replies do not arrive.
    func unlink(_ keys: [[UInt8]]) throws(RedisClientError) -> String? {
        switch self {
        case .server(let pool):
            return try pool.execute(RedisCommand("UNLINK", arguments: keys)).errorMessage
        case .cluster(let router):
            let replies = try router.executeEach(keys.map { RedisCommand("UNLINK", $0) }, slots: keys.map(RedisClusterSlot.of))
            return replies.lazy.compactMap(\.errorMessage).first
        case .sentinel(let router):
            return try router.execute([RedisCommand("UNLINK", arguments: keys)])[0].errorMessage
        }
    }

    /// The pools to run a command on that concerns every key: the server's, each primary's, or
    /// the primary's the sentinels name.
    /// - Throws: `RedisClientError` when a cluster's topology cannot be learned, or no sentinel
    ///   names a primary.
    func everyNode() throws(RedisClientError) -> [RedisConnectionPool] {
        switch self {
        case .server(let pool): [pool]
        case .cluster(let router): try router.primaries()
        case .sentinel(let router): [try router.primary()]
        }
    }

    /// Walks the keys matching a pattern with `SCAN cursor MATCH pattern COUNT count` on the
    /// server, or on each primary in turn, handing each batch found to `body`. `SCAN` may hand
    /// a key more than once, and a key moved between primaries during the walk may be missed
    /// or met twice.
    /// - Throws: `RedisClientError` when a node does not answer, or what `body` throws.
    func scan(matching pattern: [UInt8], count: Int,
              _ body: ([[UInt8]]) throws(RedisClientError) -> Void) throws(RedisClientError) {
        let done: [UInt8] = Array("0".utf8)
        for pool in try everyNode() {
            var cursor = done
            repeat {
                let reply = try pool.execute(RedisCommand("SCAN", cursor, "MATCH", pattern, "COUNT", count))
                guard case .array(let parts?) = reply, parts.count == 2, let next = parts[0].bytes,
                      case .array(let found?) = parts[1] else {
                    throw RedisClientError(.protocolViolation, "unexpected reply to SCAN: \(reply.errorMessage ?? "\(reply)")")
                }
                let batch = found.compactMap(\.bytes)
                if !batch.isEmpty { try body(batch) }
                cursor = next
            } while cursor != done
        }
    }

    // MARK: - Following the primaries (a near cache)

    /// The primaries a near cache follows, learned again now (a cluster's topology, the
    /// sentinels' answer; each at most every 100 ms), with the version they were read at (a
    /// count of what the router installed, so that an older reading never undoes a newer one):
    /// the server itself, every primary of the cluster (those serving no slot yet included),
    /// or the primary the sentinels name.
    /// - Throws: `RedisClientError` when no node tells the topology, or no sentinel names a primary.
    func primariesNow() throws(RedisClientError) -> (version: Int, primaries: [RedisNodeAddress]) {
        switch self {
        case .server(let pool):
            return (0, [RedisNodeAddress(host: pool.configuration.host, port: pool.configuration.port)])
        case .cluster(let router):
            router.refresh(urgent: false, avoiding: nil)
            let (version, masters) = try router.masters()
            return (version, masters)
        case .sentinel(let router):
            router.resolve()
            let (version, primary) = try router.versionedPrimary()
            return (version, [primary])
        }
    }

    /// Told the primaries whenever the store itself learns that they changed; nil for a server.
    var primaryObservers: PrimaryObservers? {
        switch self {
        case .server: nil
        case .cluster(let router): router.primaryObservers
        case .sentinel(let router): router.primaryObservers
        }
    }
}

/// Closures told the primaries each time a router installs a change of them, outside its lock.
final class PrimaryObservers: Sendable {
    /// Told the primaries and the version they were installed at.
    typealias Observer = @Sendable ([RedisNodeAddress], Int) -> Void
    private let observers = Mutex<[ObjectIdentifier: Observer]>([:])

    /// Tells `observer` of every change until `remove(_:)` is called with the same owner.
    func add(_ owner: AnyObject, _ observer: @escaping Observer) {
        observers.withLock { $0[ObjectIdentifier(owner)] = observer }
    }

    func remove(_ owner: AnyObject) {
        observers.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(owner)) }
    }

    func tell(_ primaries: [RedisNodeAddress], version: Int) {
        for observer in observers.withLock({ Array($0.values) }) { observer(primaries, version) }
    }
}
