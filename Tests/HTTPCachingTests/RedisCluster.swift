import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import HTTPCaching

/// A Redis Cluster of the tests' own: six `redis-server` processes on 127.0.0.1 (three
/// primaries, a replica each, made by `redis-cli --cluster create`), on ephemeral ports whose
/// cluster bus ports (port + 10000) are free too, each in a temporary directory, with a
/// `cluster-node-timeout` of 1 s so a failover takes a few seconds. Every node requires a
/// password for the default user (the admin, and the replicas' own link) and has the ACL user
/// `cache` the stores use, limited to keys and no dangerous commands.
///
/// One cluster serves a whole suite (`RedisClusterTrait`), and is stopped after it.
final class RedisCluster: @unchecked Sendable {
    /// The cluster of the suite running, set by `RedisClusterTrait`.
    @TaskLocal static var current: RedisCluster?


    /// `redis-cli` on the PATH, if there is one.
    static let cli = executableOnPath("redis-cli")

    static let skipMessage = "redis-server or redis-cli not found on PATH, so the Redis Cluster tests are skipped: install "
        + "them (apt-get install redis-server redis-tools) or run .ci/run, which does; HTTP_CACHING_REQUIRE_REDIS=1 makes them missing a failure"

    /// The nodes' ports, in the order started.
    let ports: [Int]
    let nodes = RedisProcessGroup(name: "redis-cluster-test")
    var directory: URL { nodes.directory }

    /// Starts six nodes and makes them a cluster, then waits until it is healthy.
    /// - Throws: `RedisServer.Failure` when a program is missing, a node does not start, or the
    ///   cluster is not healthy within 30 s.
    init() throws {
        guard let cli = Self.cli, RedisServer.executable != nil else {
            throw RedisServer.Failure(description: RedisServer.isRequired
                ? "HTTP_CACHING_REQUIRE_REDIS=1 requires redis-server and redis-cli on PATH: install redis-server and redis-tools, or run .ci/run"
                : Self.skipMessage)
        }
        ports = Self.freePorts(count: 6)
        for port in ports { try start(port) }
        let create = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" \"$@\" > \"\(directory.path)/create.log\" 2>&1", cli.path,
                                                  "-a", RedisProcessGroup.adminPassword, "--no-auth-warning", "--cluster", "create"]
                                      + ports.map { "127.0.0.1:\($0)" } + ["--cluster-replicas", "1", "--cluster-yes"])
        guard create.waitForExit(timeout: 60), create.exitStatus == 0 else {
            let log = (try? String(contentsOf: directory.appendingPathComponent("create.log"), encoding: .utf8)) ?? ""
            stop()
            throw RedisServer.Failure(description: "redis-cli --cluster create failed: \(log.suffix(1200))")
        }
        try waitUntilHealthy(timeout: 30)
    }

    deinit { stop() }

    /// Stops every node (SIGKILL: they hold nothing worth keeping) and removes the directory.
    func stop() { nodes.stop() }

    // MARK: - Stores

    /// `redis-cluster://cache:cache-pw@127.0.0.1:P1,...` naming every node.
    var url: String {
        "redis-cluster://\(RedisProcessGroup.user):\(RedisProcessGroup.userPassword)@" + ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }

    /// A store configuration for this cluster, on a prefix of its own, with short timeouts.
    func configuration(prefix: String = "test-\(UUID().uuidString):") throws -> RedisConfiguration {
        var configuration = try RedisConfiguration(url: url, keyPrefix: prefix)
        configuration.connectTimeout = 0.5
        configuration.commandTimeout = 0.5
        configuration.retryDelay = 0.05
        return configuration
    }

    /// A new store on this cluster, on a prefix of its own.
    func makeStore(prefix: String = "test-\(UUID().uuidString):") throws -> RedisResponseStore {
        try RedisResponseStore(configuration: configuration(prefix: prefix))
    }

    // MARK: - Nodes

    /// Runs one command on a node as the admin.
    func command(_ port: Int, _ name: String, _ arguments: any RedisArgument...) throws -> RESPValue {
        try command(port, RedisCommand(name, arguments: arguments.map(\.redisBytes)))
    }

    func command(_ port: Int, _ command: RedisCommand) throws -> RESPValue {
        let configuration = RedisConfiguration(host: "127.0.0.1", port: port, password: RedisProcessGroup.adminPassword, connectTimeout: 1)
        let connection = try RedisConnection.open(configuration, limits: RESPParser.Limits(), tls: nil)
        defer { connection.close() }
        return try connection.execute([command], timeout: 5)[0]
    }

    /// A field of `INFO` or `CLUSTER INFO` text (`cluster_state`, `role`, ...) from a node.
    func info(_ port: Int, _ field: String, section: String = "replication") throws -> String? {
        infoField(field, in: section == "cluster" ? try command(port, "CLUSTER", "INFO") : try command(port, "INFO", section))
    }

    /// The nodes running now.
    var running: [Int] { nodes.running }

    /// Each primary's port, with its replicas' ports and the slot ranges it serves, as a
    /// running node tells it.
    func shards() throws -> [(primary: Int, replicas: [Int], ranges: [ClosedRange<Int>])] {
        let askedPort = running[0]
        let topology = try RedisClusterTopology(shards: try command(askedPort, "CLUSTER", "SHARDS"), askedHost: "127.0.0.1")
        return try topology.primaries.map { primary in
            let replicas = try ports.filter { port in
                guard running.contains(port), port != primary.port else { return false }
                return try info(port, "master_port") == "\(primary.port)"
            }
            let ranges = topology.ranges.filter { $0.primary == primary }.map { $0.first...$0.last }
            return (primary.port, replicas, ranges)
        }
    }

    /// The port of the primary serving a slot.
    func primary(serving slot: Int) throws -> Int {
        try #require(try shards().first { $0.ranges.contains { $0.contains(slot) } }).primary
    }

    /// A slot being moved by hand from the primary serving it to another.
    struct SlotMove {
        let slot: Int
        let source: Int
        let target: Int
        let targetID: [UInt8]
    }

    /// Starts moving the slot of `redisKey` to another primary as `redis-cli --cluster reshard`
    /// does: the target `IMPORTING`, the source `MIGRATING`, then `MIGRATE` of the key, whose
    /// reply is returned for the test to check.
    func beginMoving(_ redisKey: [UInt8]) throws -> (move: SlotMove, migrated: RESPValue) {
        let slot = RedisClusterSlot.of(redisKey)
        let source = try primary(serving: slot)
        let target = try #require(try shards().map(\.primary).first { $0 != source })
        let sourceID = try #require(try command(source, "CLUSTER", "MYID").bytes)
        let targetID = try #require(try command(target, "CLUSTER", "MYID").bytes)
        #expect(try command(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", sourceID).isOK)
        #expect(try command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", targetID).isOK)
        let migrated = try command(source, "MIGRATE", "127.0.0.1", target, "", 0, 5000, "AUTH", RedisProcessGroup.adminPassword,
                                   "KEYS", redisKey)
        return (SlotMove(slot: slot, source: source, target: target, targetID: targetID), migrated)
    }

    /// Ends a move: every primary is told the slot's new node.
    func finishMoving(_ move: SlotMove) throws {
        for shard in try shards() {
            #expect(try command(shard.primary, "CLUSTER", "SETSLOT", move.slot, "NODE", move.targetID).isOK)
        }
    }

    /// Kills a node with SIGKILL, as a crash would.
    func kill(_ port: Int) { nodes.kill(port) }

    /// Starts a node (again, after `kill`): its directory keeps its cluster configuration, so
    /// it rejoins, as a replica of whoever took its place.
    func start(_ port: Int) throws {
        let arguments = try nodes.serverArguments(port)
            + ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"]
        try nodes.start(port, try #require(RedisServer.executable).path, arguments, what: "cluster node") {
            (try? command(port, "PING")) == .simpleString("PONG")
        }
    }

    /// Waits until every running node says the cluster is ok with all 16384 slots served,
    /// knows the nodes that are running and no others as alive, and every replica's link to its
    /// primary is up.
    /// - Throws: `RedisServer.Failure` when it is not so within `timeout`.
    func waitUntilHealthy(timeout: TimeInterval = 30) throws {
        var last = ""
        let healthy = eventually(timeout: timeout) {
            do {
                for port in running {
                    guard try info(port, "cluster_state", section: "cluster") == "ok",
                          try info(port, "cluster_slots_ok", section: "cluster") == "16384" else { last = "\(port): not ok"; return false }
                    if try info(port, "role") == "slave", try info(port, "master_link_status") != "up" {
                        last = "\(port): replica link down"
                        return false
                    }
                }
                let primaries = try shards()
                guard primaries.count == 3, primaries.allSatisfy({ !$0.replicas.isEmpty }) || running.count < 6 else {
                    last = "shards: \(primaries)"
                    return false
                }
                return true
            } catch {
                last = "\(error)"
                return false
            }
        }
        if !healthy { throw RedisServer.Failure(description: "the cluster was not healthy within \(timeout) s: \(last)") }
    }

    /// Ports nothing listens on now whose bus ports (port + 10000) are free too, from a range
    /// below the kernel's ephemeral ports so the bus port stays a valid port.
    private static func freePorts(count: Int) -> [Int] {
        var chosen: [Int] = []
        while chosen.count < count {
            let port = Int.random(in: 20_000..<30_000)
            if !chosen.contains(port), isFree(port), isFree(port + 10_000) { chosen.append(port) }
        }
        return chosen
    }

    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// Starts one `RedisCluster` for a whole suite, hands it to the suite's tests as
/// `RedisCluster.current`, and stops it after the last one. Where `redis-server` or
/// `redis-cli` is missing the suite is skipped with a message, unless
/// `HTTP_CACHING_REQUIRE_REDIS=1`, which makes that a failure.
struct RedisClusterTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        test.isSuite ? self : nil
    }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try RedisCluster()
        defer { cluster.stop() }
        try await RedisCluster.$current.withValue(cluster) { try await function() }
    }
}

extension Trait where Self == RedisClusterTrait {
    /// One Redis Cluster for the suite (see `RedisClusterTrait`).
    static var redisCluster: Self { RedisClusterTrait() }
}

extension Trait where Self == ConditionTrait {
    /// Runs a suite only where `redis-server` and `redis-cli` are installed, or where they are
    /// required (then a missing one fails with the same message).
    static var redisClusterPrograms: Self {
        .enabled(if: (RedisServer.executable != nil && RedisCluster.cli != nil) || RedisServer.isRequired,
                 Comment(rawValue: RedisCluster.skipMessage))
    }
}
