import Foundation
import Synchronization

/// Sends each command to the primary that serves its key's hash slot in a Redis Cluster.
///
/// The map of slots to primaries is learned on first use from the configured nodes (`CLUSTER
/// SHARDS`, or `CLUSTER SLOTS` on servers older than 7), and learned again:
/// - after a `MOVED` redirection, which also points the one slot at its new primary at once;
/// - after a node fails to answer, or a node answers `CLUSTERDOWN`: a primary may have been
///   replaced by its replica. If the slot's primary has changed, the command is sent to the
///   new one once; otherwise the call fails, so while a primary is down its keys fail fast.
///   These refreshes happen at most every `refreshInterval`.
/// `ASK` (a slot being migrated) sends `ASKING` and the commands to the node named, without
/// changing the map. At most `maximumRedirections` are followed for one call.
///
/// Each node has a `RedisConnectionPool` of its own with the configuration's pool size,
/// timeouts, retry delay and credentials. Commands go to primaries only: replicas are never
/// read (`READONLY` is never sent), so a read never sees a replica's lagging copy of an entry
/// just replaced or removed. One caller refreshes at a time; the others go on with the map
/// they have; the lock guards only the map and the pools, never a call to a node.
final class RedisClusterRouter: Sendable {
    let configuration: RedisConfiguration
    let limits: RESPParser.Limits
    /// The TLS context of every node's connections; nil for plain TCP.
    let tls: RedisTLSContext?

    /// The most redirections followed for one call.
    static let maximumRedirections = 5
    /// The least time between two refreshes asked for by failures and redirections.
    static let refreshInterval: TimeInterval = 0.1

    fileprivate struct State {
        /// The pool of the primary serving each slot; empty until a topology is known.
        var owners: [RedisConnectionPool?] = []
        var topology: RedisClusterTopology?
        var pools: [RedisNodeAddress: RedisConnectionPool] = [:]
        /// When the topology may be learned again, and why calls fail while none is known.
        var rediscovery = RedisRediscovery()
        /// How many topologies were installed.
        var refreshCount = 0
        /// How many `MOVED` and `ASK` redirections were followed.
        var redirectionCount = 0
    }

    private let state = Mutex(State())
    /// Told the primaries (`RedisClusterTopology.masters`) each time a topology that changes
    /// them is installed.
    let primaryObservers = PrimaryObservers()

    init(configuration: RedisConfiguration, limits: RESPParser.Limits, tls: RedisTLSContext?) {
        self.configuration = configuration
        self.limits = limits
        self.tls = tls
    }

    /// The topology in use, if one is known.
    var topology: RedisClusterTopology? { state.withLock { $0.topology } }

    /// How many topologies have been installed (the first one included).
    var refreshCount: Int { state.withLock { $0.refreshCount } }

    /// How many `MOVED` and `ASK` redirections have been followed.
    var redirectionCount: Int { state.withLock { $0.redirectionCount } }

    // MARK: - Routing

    /// Sends commands that all touch keys of one slot, pipelined, to the primary serving it,
    /// following redirections (the whole pipeline again: its commands are on one slot's keys,
    /// so a redirection refuses them all, and a `MULTI` they make is discarded).
    /// - Throws: `RedisClientError` when no node answers, or the redirections do not end.
    func execute(_ commands: [RedisCommand], slot: Int) throws(RedisClientError) -> [RESPValue] {
        var target = try owner(of: slot)
        var asking = false
        var redirections = 0
        var retriedAfterFailure = false
        while true {
            let replies: [RESPValue]
            do {
                replies = try send(commands, to: target, asking: asking)
            } catch {
                // The node may have been replaced (a failover): learn the map again and, if the
                // slot has a new primary, try it once.
                refresh(urgent: false, avoiding: target)
                guard !retriedAfterFailure, error.kind == .connect || error.kind == .closed,
                      let next = currentOwner(of: slot), next !== target else { throw error }
                retriedAfterFailure = true
                (target, asking) = (next, false)
                continue
            }
            guard let redirect = Redirection(in: replies) else {
                if replies.first?.errorMessage?.hasPrefix("CLUSTERDOWN") == true { refresh(urgent: false, avoiding: nil) }
                return replies
            }
            redirections += 1
            guard redirections <= Self.maximumRedirections else {
                throw RedisClientError(.cluster, "the Redis Cluster redirected a command for slot \(slot) more than "
                                       + "\(Self.maximumRedirections) times (last: \(redirect))")
            }
            (target, asking) = follow(redirect, from: target)
        }
    }

    /// One command for each slot given, pipelined to each primary in turn; a command
    /// redirected is sent again by itself. The replies are in the commands' order.
    /// - Throws: `RedisClientError` when a node does not answer.
    func executeEach(_ commands: [RedisCommand], slots: [Int]) throws(RedisClientError) -> [RESPValue] {
        guard !commands.isEmpty else { return [] }
        try ensureTopology()
        let owners = state.withLock { $0.owners }
        var groups: [(pool: RedisConnectionPool?, indices: [Int])] = []
        var groupOf: [ObjectIdentifier?: Int] = [:]
        for (index, slot) in slots.enumerated() {
            let pool = owners.isEmpty ? nil : owners[slot]
            let id = pool.map(ObjectIdentifier.init)
            if let group = groupOf[id] { groups[group].indices.append(index) } else {
                groupOf[id] = groups.count
                groups.append((pool, [index]))
            }
        }
        var replies = [RESPValue](repeating: .bulkString(nil), count: commands.count)
        for group in groups {
            guard let pool = group.pool else { // no primary known for these slots: each by itself
                for index in group.indices { replies[index] = try execute([commands[index]], slot: slots[index])[0] }
                continue
            }
            let answered: [RESPValue]
            do {
                answered = try pool.execute(group.indices.map { commands[$0] })
            } catch {
                refresh(urgent: false, avoiding: pool)
                throw error
            }
            for (index, reply) in zip(group.indices, answered) {
                replies[index] = reply.isRedirection ? try execute([commands[index]], slot: slots[index])[0] : reply
            }
        }
        return replies
    }

    /// Every primary the topology names (those serving no slot yet included), with the count
    /// of topologies installed when it was read; learned first if none is known.
    /// - Throws: `RedisClientError` when no node tells the topology.
    func masters() throws(RedisClientError) -> (version: Int, masters: [RedisNodeAddress]) {
        try ensureTopology()
        return state.withLock { ($0.refreshCount, $0.topology?.masters ?? []) }
    }

    /// The pool of each primary serving a slot now, each once, learning the topology first if
    /// none is known.
    /// - Throws: `RedisClientError` when no node tells the topology.
    func primaries() throws(RedisClientError) -> [RedisConnectionPool] {
        try ensureTopology()
        return state.withLock { state in
            (state.topology?.primaries ?? []).map { state.pool(for: $0, self) }
        }
    }

    // MARK: - Sending

    private func send(_ commands: [RedisCommand], to pool: RedisConnectionPool, asking: Bool) throws(RedisClientError) -> [RESPValue] {
        guard asking else { return try pool.execute(commands) }
        return Array(try pool.execute([RedisCommand("ASKING")] + commands).dropFirst())
    }

    /// Where a redirection points: `MOVED` points the slot at its new primary and asks for the
    /// whole map again; `ASK` is for this call only.
    private func follow(_ redirect: Redirection, from node: RedisConnectionPool) -> (RedisConnectionPool, asking: Bool) {
        // An unknown endpoint (`MOVED 3999 :6380`) is the host of the node that answered.
        let address = RedisNodeAddress(host: redirect.host.isEmpty ? node.configuration.host : redirect.host, port: redirect.port)
        let pool = state.withLock { state in
            let pool = state.pool(for: address, self)
            if redirect.isMoved, !state.owners.isEmpty { state.owners[redirect.slot] = pool }
            state.redirectionCount += 1
            return pool
        }
        if redirect.isMoved { refresh(urgent: false, avoiding: nil) }
        return (pool, !redirect.isMoved)
    }

    /// The primary serving a slot, learning the topology first if none is known, and again
    /// (at most every `refreshInterval`) if no primary serves the slot.
    private func owner(of slot: Int) throws(RedisClientError) -> RedisConnectionPool {
        if let pool = currentOwner(of: slot) { return pool }
        try ensureTopology()
        if let pool = currentOwner(of: slot) { return pool }
        refresh(urgent: false, avoiding: nil)
        if let pool = currentOwner(of: slot) { return pool }
        throw RedisClientError(.cluster, "no primary of the Redis Cluster serves hash slot \(slot) at the moment")
    }

    /// Learns the topology if none is known; while a discovery that failed is being waited out
    /// (`retryDelay`), fails at once with its reason.
    private func ensureTopology() throws(RedisClientError) {
        let known = state.withLock { state -> (hasMap: Bool, failure: RedisClientError?) in
            let now = DispatchTime.now().uptimeNanoseconds
            return (state.topology != nil, state.rediscovery.failing(now: now))
        }
        if known.hasMap { return }
        if let failure = known.failure { throw failure }
        try discover()
    }

    private func currentOwner(of slot: Int) -> RedisConnectionPool? {
        state.withLock { $0.owners.isEmpty ? nil : $0.owners[slot] }
    }
}

extension RedisClusterRouter {
    /// Learns the topology when none is known. Callers that find none each ask (a few
    /// commands more at start), so none of them waits for another.
    /// - Throws: `RedisClientError` saying why no node told it; calls fail at once with it for
    ///   `retryDelay`.
    private func discover() throws(RedisClientError) {
        let candidates = state.withLock { state in
            configuration.seedNodes.map { state.pool(for: $0, self) }
        }
        do throws(RedisClientError) {
            install(try ask(candidates))
        } catch {
            let until = DispatchTime.now().uptimeNanoseconds &+ UInt64(configuration.retryDelay * 1e9)
            state.withLock { $0.rediscovery.failed(error, until: until, knowsNothing: $0.topology == nil) }
            throw error
        }
    }

    /// Learns the topology again, unless another caller is doing so, or (unless `urgent`) one
    /// was learned less than `refreshInterval` ago. The node that just failed is asked last.
    /// A refresh that fails keeps the map there is.
    func refresh(urgent: Bool, avoiding failed: RedisConnectionPool?) {
        let interval = UInt64(Self.refreshInterval * 1e9)
        let candidates = state.withLock { state -> [RedisConnectionPool]? in
            let now = DispatchTime.now().uptimeNanoseconds
            guard let topology = state.topology, state.rediscovery.begin(now: now, interval: interval, urgent: urgent) else { return nil }
            var seen = Set<RedisNodeAddress>()
            let addresses = (topology.nodes + configuration.seedNodes).filter { seen.insert($0).inserted }
            let pools = addresses.map { state.pool(for: $0, self) }
            return pools.filter { $0 !== failed } + pools.filter { $0 === failed }
        }
        guard let candidates else { return }
        let learned = try? ask(candidates)
        state.withLock { $0.rediscovery.end() }
        if let learned { install(learned) }
    }

    /// Asks each node in turn for the topology; the first that tells one with served slots wins.
    /// - Throws: `RedisClientError` with every node's reason when none does.
    private func ask(_ candidates: [RedisConnectionPool]) throws(RedisClientError) -> RedisClusterTopology {
        var reasons: [String] = []
        for pool in candidates {
            let node = RedisNodeAddress(host: pool.configuration.host, port: pool.configuration.port)
            do throws(RedisClientError) {
                var reply = try pool.execute(RedisCommand("CLUSTER", "SHARDS"))
                var topology: RedisClusterTopology
                if let message = reply.errorMessage, message.lowercased().contains("unknown subcommand") {
                    reply = try pool.execute(RedisCommand("CLUSTER", "SLOTS"))
                    topology = try RedisClusterTopology(slots: reply, askedHost: node.host)
                } else if let message = reply.errorMessage {
                    if message.contains("cluster support disabled") {
                        throw RedisClientError(.cluster, "Redis at \(node) is not a cluster node (\(message)); use redis:// for a single server")
                    }
                    reasons.append("\(node): \(message)")
                    continue
                } else {
                    topology = try RedisClusterTopology(shards: reply, askedHost: node.host, tls: tls != nil)
                }
                guard topology.coveredSlotCount > 0 else {
                    reasons.append("\(node): serves no slots yet")
                    continue
                }
                return topology
            } catch where error.kind == .cluster {
                throw error
            } catch {
                reasons.append(error.description)
            }
        }
        throw RedisClientError(.connect, "no node of the Redis Cluster told its topology: " + reasons.joined(separator: "; "))
    }

    /// Makes a topology the one in use: each slot's pool, and pools only for its nodes and the seeds.
    private func install(_ topology: RedisClusterTopology) {
        let changed = state.withLock { state -> Int? in
            var owners = [RedisConnectionPool?](repeating: nil, count: RedisClusterSlot.count)
            for range in topology.ranges {
                let pool = state.pool(for: range.primary, self)
                for slot in range.first...range.last { owners[slot] = pool }
            }
            let kept = Set(topology.nodes + configuration.seedNodes)
            state.pools = state.pools.filter { kept.contains($0.key) }
            state.owners = owners
            defer { state.topology = topology }
            state.rediscovery.learned()
            state.refreshCount += 1
            return Set(state.topology?.masters ?? []) != Set(topology.masters) ? state.refreshCount : nil
        }
        if let changed { primaryObservers.tell(topology.masters, version: changed) }
    }
}

extension RedisClusterRouter.State {
    /// The pool of a node, made on first use (no connection is opened until a call).
    fileprivate mutating func pool(for node: RedisNodeAddress, _ router: RedisClusterRouter) -> RedisConnectionPool {
        if let pool = pools[node] { return pool }
        let pool = RedisConnectionPool(configuration: router.configuration.forNode(node), limits: router.limits, tls: router.tls)
        pools[node] = pool
        return pool
    }
}

/// A `MOVED` or `ASK` error reply: `MOVED <slot> <host>:<port>`.
struct Redirection: CustomStringConvertible {
    let isMoved: Bool
    let slot: Int
    /// Empty when the node's endpoint is unknown: the host of the node that answered.
    let host: String
    let port: Int

    /// The first redirection among replies, if any.
    init?(in replies: [RESPValue]) {
        guard let message = replies.lazy.compactMap(\.errorMessage).first(where: { $0.hasPrefix("MOVED ") || $0.hasPrefix("ASK ") }) else {
            return nil
        }
        self.init(message)
    }

    init?(_ message: String) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, parts[0] == "MOVED" || parts[0] == "ASK", let slot = Int(parts[1]),
              (0..<RedisClusterSlot.count).contains(slot), let colon = parts[2].lastIndex(of: ":"),
              let port = Int(parts[2][parts[2].index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        isMoved = parts[0] == "MOVED"
        self.slot = slot
        var host = parts[2][..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        self.host = String(host)
        self.port = port
    }

    var description: String { "\(isMoved ? "MOVED" : "ASK") \(slot) \(host):\(port)" }
}

extension RESPValue {
    /// Whether this is a `MOVED` or `ASK` error reply.
    var isRedirection: Bool {
        guard let message = errorMessage else { return false }
        return message.hasPrefix("MOVED ") || message.hasPrefix("ASK ")
    }
}
