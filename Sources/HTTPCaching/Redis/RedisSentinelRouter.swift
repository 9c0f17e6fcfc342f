import Foundation
import Synchronization

/// Sends commands to the primary Redis Sentinel names for a master name.
///
/// On first use it asks the sentinels in turn, `SENTINEL get-master-addr-by-name <name>`; the
/// first to answer with an address is asked first from then on. Every connection to the
/// primary is checked with `ROLE` when it opens (`RedisConnectionPool.verifiesPrimary`): a
/// node that says it is a replica is never written to nor read from. The sentinels are asked
/// again, at most every `resolveInterval`:
/// - after a call to the primary fails (a connection refused or closed, a timeout, a node
///   that says it is a replica): if they name another node, its pool replaces the old one and
///   the call is sent there once; otherwise the call fails, so while the primary is down calls
///   fail fast (the pool's retry delay);
/// - after a reply `-READONLY` (the node was demoted under an open connection): the pool's idle
///   connections are closed too, so every connection is opened and checked again.
/// - every `recheckInterval` while calls are made, in the background: a failover that leaves
///   the old primary answering (`SENTINEL FAILOVER`: it is demoted only seconds after the
///   switch) is followed within that time, not when the old primary is demoted.
/// It does not subscribe to `+switch-master`. One resolution runs at a time; callers go on with
/// the primary they have. The lock guards only the state, never a call to a node.
final class RedisSentinelRouter: Sendable {
    let configuration: RedisConfiguration
    let limits: RESPParser.Limits
    let masterName: String

    /// The least time between two resolutions asked for by failures.
    static let resolveInterval: TimeInterval = 0.1
    /// How old the sentinels' last answer may be before a call has them asked again, in the
    /// background.
    static let recheckInterval: TimeInterval = 1

    fileprivate struct State {
        var primary: (address: RedisNodeAddress, pool: RedisConnectionPool)?
        /// The sentinels in the order asked; the last one that answered first.
        var sentinels: [RedisNodeAddress]
        var sentinelPools: [RedisNodeAddress: RedisConnectionPool] = [:]
        /// When the sentinels may be asked again, and why calls fail while no primary is known.
        var rediscovery = RedisRediscovery()
        /// How many times a sentinel named the primary.
        var resolveCount = 0
        /// How many times the primary's pool was replaced after the first.
        var switchCount = 0
    }

    private let state: Mutex<State>
    /// Told the primary's address each time another one is installed.
    let primaryObservers = PrimaryObservers()

    init(configuration: RedisConfiguration, limits: RESPParser.Limits) {
        self.configuration = configuration
        self.limits = limits
        masterName = configuration.sentinelMasterName ?? ""
        state = Mutex(State(sentinels: configuration.sentinelNodes))
    }

    /// The primary's address, with the count of resolutions when it was read; asks the
    /// sentinels first if none is known.
    /// - Throws: `RedisClientError` when no sentinel names a primary.
    func versionedPrimary() throws(RedisClientError) -> (version: Int, primary: RedisNodeAddress) {
        _ = try primary()
        guard let known = state.withLock({ state in state.primary.map { (state.resolveCount, $0.address) } }) else {
            throw RedisClientError(.sentinel, "no sentinel named the primary of '\(masterName)'")
        }
        return known
    }

    /// The primary's address in use, if one is known.
    var primaryAddress: RedisNodeAddress? { state.withLock { $0.primary?.address } }

    /// The sentinels in the order they will be asked.
    var sentinelOrder: [RedisNodeAddress] { state.withLock { $0.sentinels } }

    /// How many times a sentinel has named the primary.
    var resolveCount: Int { state.withLock { $0.resolveCount } }

    /// How many times the primary's pool has been replaced (a failover followed).
    var switchCount: Int { state.withLock { $0.switchCount } }

    /// Sends commands, pipelined, to the primary; after a failure, asks the sentinels again and
    /// sends them once more if they name another node.
    /// - Throws: `RedisClientError` when no sentinel names a primary, or the primary does not answer.
    func execute(_ commands: [RedisCommand]) throws(RedisClientError) -> [RESPValue] {
        var pool = try primary()
        recheckIfDue()
        var retried = false
        while true {
            do throws(RedisClientError) {
                let replies = try pool.execute(commands)
                if let message = replies.lazy.compactMap(\.errorMessage).first(where: { $0.hasPrefix("READONLY") }) {
                    pool.discardIdleConnections()
                    throw RedisClientError(.replica, "Redis at \(pool.configuration.host):\(pool.configuration.port), "
                                           + "named the primary, refused a write as a replica: \(message)")
                }
                return replies
            } catch {
                resolve()
                guard !retried, error.kind != .timeout, let next = state.withLock({ $0.primary?.pool }), next !== pool else {
                    throw error
                }
                retried = true
                pool = next
            }
        }
    }

    /// The primary's pool, asking the sentinels first if none is known; while a resolution
    /// that failed is being waited out (`retryDelay`), fails at once with its reason.
    /// - Throws: `RedisClientError` when no sentinel names a primary.
    func primary() throws(RedisClientError) -> RedisConnectionPool {
        let known = state.withLock { state -> (pool: RedisConnectionPool?, failure: RedisClientError?) in
            let now = DispatchTime.now().uptimeNanoseconds
            return (state.primary?.pool, state.rediscovery.failing(now: now))
        }
        if let pool = known.pool { return pool }
        if let failure = known.failure { throw failure }
        let sentinels = state.withLock { $0.sentinels }
        do throws(RedisClientError) {
            let answer = try ask(sentinels)
            return install(answer.primary, answeredBy: answer.sentinel)
        } catch {
            let until = DispatchTime.now().uptimeNanoseconds &+ UInt64(configuration.retryDelay * 1e9)
            state.withLock { $0.rediscovery.failed(error, until: until, knowsNothing: $0.primary == nil) }
            throw error
        }
    }

    /// Has the sentinels asked again in the background when their last answer is older than
    /// `recheckInterval` and no resolution is running.
    private func recheckIfDue() {
        let interval = UInt64(Self.recheckInterval * 1e9)
        let due = state.withLock { $0.rediscovery.isDue(now: DispatchTime.now().uptimeNanoseconds, interval: interval) }
        if due { DispatchQueue.global().async { self.resolve() } }
    }

    /// Asks the sentinels again after a failure, unless another caller is asking, or one asked
    /// less than `resolveInterval` ago. Another node than the one in use gets a new pool. A
    /// resolution that fails keeps the primary there is.
    func resolve() {
        let interval = UInt64(Self.resolveInterval * 1e9)
        let sentinels = state.withLock { state -> [RedisNodeAddress]? in
            let now = DispatchTime.now().uptimeNanoseconds
            guard state.rediscovery.begin(now: now, interval: interval) else { return nil }
            return state.sentinels
        }
        guard let sentinels else { return }
        let answer = try? ask(sentinels)
        state.withLock { $0.rediscovery.end() }
        if let answer { _ = install(answer.primary, answeredBy: answer.sentinel) }
    }
}

extension RedisSentinelRouter {
    /// Asks each sentinel in turn for the primary's address; the first that names one wins.
    /// - Throws: `RedisClientError` of kind `.sentinel` with every sentinel's reason when none does.
    private func ask(_ sentinels: [RedisNodeAddress]) throws(RedisClientError)
        -> (primary: RedisNodeAddress, sentinel: RedisNodeAddress) {
        var reasons: [String] = []
        for sentinel in sentinels {
            let pool = sentinelPool(sentinel)
            do throws(RedisClientError) {
                let reply = try pool.execute(RedisCommand("SENTINEL", "get-master-addr-by-name", masterName))
                switch reply {
                case .array(let parts?) where parts.count == 2:
                    guard let host = parts[0].bytes, let portBytes = parts[1].bytes,
                          let port = Int(String(decoding: portBytes, as: UTF8.self)), (1...65_535).contains(port) else {
                        reasons.append("\(sentinel): an unexpected reply \(reply)")
                        continue
                    }
                    return (RedisNodeAddress(host: String(decoding: host, as: UTF8.self), port: port), sentinel)
                case .array(nil), .bulkString(nil):
                    reasons.append("\(sentinel): does not know a master named '\(masterName)'")
                default:
                    reasons.append("\(sentinel): \(reply.errorMessage ?? "an unexpected reply \(reply)")")
                }
            } catch {
                reasons.append(error.description)
            }
        }
        throw RedisClientError(.sentinel, "no sentinel named the primary of '\(masterName)': " + reasons.joined(separator: "; "))
    }

    /// Makes the primary a sentinel named the one in use (a new pool when its address changed),
    /// and puts the sentinel that answered first.
    private func install(_ address: RedisNodeAddress, answeredBy sentinel: RedisNodeAddress) -> RedisConnectionPool {
        let (pool, changed) = state.withLock { state -> (RedisConnectionPool, Int?) in
            state.resolveCount += 1
            state.rediscovery.learned(now: DispatchTime.now().uptimeNanoseconds)
            state.sentinels = [sentinel] + state.sentinels.filter { $0 != sentinel }
            if let current = state.primary, current.address == address { return (current.pool, nil) }
            if state.primary != nil { state.switchCount += 1 }
            let pool = RedisConnectionPool(configuration: configuration.forPrimary(address), limits: limits, tls: nil, verifiesPrimary: true)
            state.primary = (address, pool)
            return (pool, state.resolveCount)
        }
        if let changed { primaryObservers.tell([address], version: changed) }
        return pool
    }

    /// The pool of a sentinel, made on first use.
    private func sentinelPool(_ sentinel: RedisNodeAddress) -> RedisConnectionPool {
        state.withLock { state in
            if let pool = state.sentinelPools[sentinel] { return pool }
            let pool = RedisConnectionPool(configuration: configuration.forSentinel(sentinel), limits: limits, tls: nil)
            state.sentinelPools[sentinel] = pool
            return pool
        }
    }
}
