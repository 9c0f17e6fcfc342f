import Foundation
import Synchronization

/// Redis's client-side caching for a near cache in front of a Redis Cluster, or of the
/// primary Redis Sentinel names: one `RedisInvalidationListener` on each primary (every write
/// to a key happens on the primary serving its slot), all reporting to one near cache.
///
/// Memory may serve only while a listener tracks every primary there is: `up` is called when
/// the last of them is tracking, `lost` as soon as one stops, or the primaries change. The
/// primaries are learned again every `checkInterval` on a thread of its own (the cluster's
/// topology, the sentinels' answer; every primary named, one serving no slot yet included, a
/// failed one only while it still serves slots), and
/// at once whenever the store itself installs a change of them (a topology learned after a
/// `MOVED`, a failover it followed): a listener is started for each new primary and
/// stopped for each gone one, and until the new ones track, memory does not serve. A primary
/// demoted with its connection open (a manual failover) goes on telling of the writes it
/// replicates until the change is learned. No lock is held while anything talks to a server;
/// the near cache is told under the fleet's lock (it only empties memory then).
final class RedisInvalidationFleet: Sendable {
    /// How often the primaries are learned again.
    static let checkInterval: TimeInterval = 1

    private let backend: RedisBackend
    private let configuration: RedisConfiguration
    private let prefix: [UInt8]
    private let up: RedisInvalidationListener.Up
    private let lost: @Sendable () -> Void
    private let invalidated: RedisInvalidationListener.Invalidated
    /// One TLS context for every listener of a `rediss-cluster://` store, made once.
    private let tls: RedisTLSContext?

    /// A listener and whether it is tracking; `id` tells its reports from a replaced one's.
    private struct Member {
        let id: Int
        let listener: RedisInvalidationListener
        var tracking = false
    }

    private struct State {
        var members: [RedisNodeAddress: Member] = [:]
        var serving = false
        var nextID = 0
        /// The version of the primaries followed (`RedisBackend.primariesNow`): older readings
        /// are ignored.
        var version = -1
        var stopped = false
    }

    private let state = Mutex(State())

    init(backend: RedisBackend, configuration: RedisConfiguration, prefix: [UInt8], up: @escaping RedisInvalidationListener.Up,
         lost: @escaping @Sendable () -> Void, invalidated: @escaping RedisInvalidationListener.Invalidated) {
        self.backend = backend
        self.configuration = configuration
        self.prefix = prefix
        self.up = up
        self.lost = lost
        self.invalidated = invalidated
        tls = configuration.tls.flatMap { options in try? RedisTLSContext(options) }
    }

    /// Starts following: the thread that learns the primaries (not Foundation's queues: it
    /// blocks on sockets), and the store's own news of them.
    func start() {
        backend.primaryObservers?.add(self) { [weak self] primaries, version in self?.follow(primaries, version: version) }
        let thread = Thread { [self] in run() }
        thread.name = "swift-http-caching.redis-primaries"
        thread.start()
    }

    /// Stops every listener; the thread ends within about 50 ms.
    func stop() {
        backend.primaryObservers?.remove(self)
        let members = state.withLock { state in
            state.stopped = true
            defer { state.members = [:] }
            return Array(state.members.values)
        }
        for member in members { member.listener.stop() }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// The primaries followed now, tracking or not.
    var primaries: [RedisNodeAddress] { state.withLock { Array($0.members.keys) } }

    /// The primaries tracked now.
    var tracked: [RedisNodeAddress] { state.withLock { $0.members.filter(\.value.tracking).map(\.key) } }

    private func run() {
        while !isStopped {
            if let (version, primaries) = try? backend.primariesNow() { follow(primaries, version: version) }
            let next = Deadline(after: Self.checkInterval)
            while !isStopped && next.remainingMilliseconds > 0 { usleep(UInt32(min(next.remainingMilliseconds, 50)) * 1000) }
        }
    }

    /// Follows exactly `primaries`, read at `version` (an older reading than the one followed is
    /// ignored): a listener started for each new one, stopped for each gone one. Any change
    /// moves the epoch; memory serves again once every primary is tracked (at once when the
    /// change only took primaries away).
    func follow(_ primaries: [RedisNodeAddress], version: Int) {
        let wanted = Set(primaries)
        let change = state.withLock { state -> (started: [Member], stopped: [Member])? in
            guard !state.stopped, !wanted.isEmpty, version >= state.version else { return nil }
            state.version = version
            guard Set(state.members.keys) != wanted else { return nil }
            let gone = state.members.filter { !wanted.contains($0.key) }
            for address in gone.keys { state.members[address] = nil }
            var started: [Member] = []
            for address in wanted where state.members[address] == nil {
                let member = Member(id: state.nextID, listener: listener(for: address, id: state.nextID))
                state.nextID += 1
                state.members[address] = member
                started.append(member)
            }
            state.serving = false
            lost() // a new epoch: a read from a primary not yet tracked never fills memory
            if started.isEmpty && state.members.values.allSatisfy(\.tracking) {
                state.serving = true
                up()
            }
            return (started, Array(gone.values))
        }
        guard let change else { return }
        for member in change.stopped { member.listener.stop() }
        for member in change.started { member.listener.start() }
    }

    private func listener(for address: RedisNodeAddress, id: Int) -> RedisInvalidationListener {
        let node = switch backend {
        case .sentinel: configuration.forPrimary(address)
        default: configuration.forNode(address)
        }
        return RedisInvalidationListener(
            configuration: node, prefix: prefix, tls: .some(tls),
            up: { [weak self] in self?.tracking(address, id: id, true) },
            lost: { [weak self] in self?.tracking(address, id: id, false) },
            invalidated: { [weak self] keys in self?.told(keys, by: address, id: id) })
    }

    /// Passes on what a current listener tells; a replaced one's last words are dropped (its
    /// primary is gone, and memory was emptied when it went).
    private func told(_ keys: [[UInt8]]?, by address: RedisNodeAddress, id: Int) {
        guard state.withLock({ !$0.stopped && $0.members[address]?.id == id }) else { return }
        invalidated(keys)
    }

    /// A listener's report: memory serves once every primary is tracked, and stops when one is
    /// not. The near cache is told under the lock, so its news keep the order of the changes.
    private func tracking(_ address: RedisNodeAddress, id: Int, _ isTracking: Bool) {
        state.withLock { state in
            guard !state.stopped, state.members[address]?.id == id else { return }
            state.members[address]?.tracking = isTracking
            if isTracking && !state.serving && state.members.values.allSatisfy(\.tracking) {
                state.serving = true
                up()
            } else if !isTracking && state.serving {
                state.serving = false
                lost()
            }
        }
    }
}
