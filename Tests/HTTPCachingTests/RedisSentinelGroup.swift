import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import HTTPCaching

/// A Redis Sentinel group of the tests' own: a primary and a replica (`redis-server`), and
/// three sentinels (`redis-sentinel`) watching them as `mymaster` with a quorum of 2 and a
/// `down-after-milliseconds` of 1000, all on 127.0.0.1 on ephemeral ports, each in a temporary
/// directory (a sentinel rewrites its configuration file, so each has its own). The data nodes
/// require a password for the default user (the admin, the replica's link and the sentinels'
/// `auth-pass`) and have the ACL user `cache`, limited to keys and no dangerous commands (so
/// `ROLE` is refused to it); the sentinels require a password of their own.
///
/// One group serves a whole suite (`RedisSentinelTrait`), and is stopped after it.
final class RedisSentinelGroup: @unchecked Sendable {
    /// The group of the suite running, set by `RedisSentinelTrait`.
    @TaskLocal static var current: RedisSentinelGroup?

    static let masterName = "mymaster"
    static let sentinelPassword = "sentinel-pw"

    /// `redis-sentinel` on the PATH, if there is one.
    static let sentinelExecutable = executableOnPath("redis-sentinel")

    static let skipMessage = "redis-server or redis-sentinel not found on PATH, so the Redis Sentinel tests are skipped: install "
        + "them (apt-get install redis-server redis-sentinel) or run .ci/run, which does; HTTP_CACHING_REQUIRE_REDIS=1 makes them missing a failure"

    /// The data nodes' ports: the first primary, then its replica.
    let dataPorts: [Int]
    /// The sentinels' ports.
    let sentinelPorts: [Int]
    let nodes = RedisProcessGroup(name: "redis-sentinel-test")

    /// Starts the primary, its replica and three sentinels, then waits until the group is healthy.
    /// - Throws: `RedisServer.Failure` when a program is missing, a process does not start, or
    ///   the group is not healthy within 30 s.
    init() throws {
        guard let sentinel = Self.sentinelExecutable, RedisServer.executable != nil else {
            throw RedisServer.Failure(description: RedisServer.isRequired
                ? "HTTP_CACHING_REQUIRE_REDIS=1 requires redis-server and redis-sentinel on PATH: install them, or run .ci/run"
                : Self.skipMessage)
        }
        // Ports the kernel hands out (outside the range the cluster's suite picks from, which
        // runs at the same time), none twice.
        var ports: [Int] = []
        while ports.count < 5 {
            let port = RedisServer.freePort()
            if !ports.contains(port) { ports.append(port) }
        }
        dataPorts = Array(ports[0..<2])
        sentinelPorts = Array(ports[2...])
        do {
            try startData(dataPorts[0], replicaOf: nil)
            try startData(dataPorts[1], replicaOf: dataPorts[0])
            for port in sentinelPorts { try startSentinel(port, executable: sentinel) }
            try waitUntilHealthy(timeout: 30)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops every process (SIGKILL: they hold nothing worth keeping) and removes the directory.
    func stop() { nodes.stop() }

    // MARK: - Stores

    /// `redis-sentinel://cache:cache-pw@127.0.0.1:S1,...#mymaster` naming every sentinel.
    var url: String {
        "redis-sentinel://\(RedisProcessGroup.user):\(RedisProcessGroup.userPassword)@" + sentinelPorts.map { "127.0.0.1:\($0)" }.joined(separator: ",")
            + "#\(Self.masterName)"
    }

    /// A store configuration for this group, on a prefix of its own, with short timeouts and
    /// the sentinels' password.
    func configuration(prefix: String = "test-\(UUID().uuidString):") throws -> RedisConfiguration {
        var configuration = try RedisConfiguration(url: url, keyPrefix: prefix)
        configuration.sentinelPassword = Self.sentinelPassword
        configuration.connectTimeout = 0.5
        configuration.commandTimeout = 0.5
        configuration.retryDelay = 0.05
        return configuration
    }

    /// A new store on this group, on a prefix of its own.
    func makeStore(prefix: String = "test-\(UUID().uuidString):") throws -> RedisResponseStore {
        try RedisResponseStore(configuration: configuration(prefix: prefix))
    }

    // MARK: - Nodes

    /// Runs one command on a data node as the admin, or on a sentinel with its password.
    func command(_ port: Int, _ name: String, _ arguments: any RedisArgument...) throws -> RESPValue {
        let password = sentinelPorts.contains(port) ? Self.sentinelPassword : RedisProcessGroup.adminPassword
        let configuration = RedisConfiguration(host: "127.0.0.1", port: port, password: password, connectTimeout: 1)
        let connection = try RedisConnection.open(configuration, limits: RESPParser.Limits(), tls: nil)
        defer { connection.close() }
        return try connection.execute([RedisCommand(name, arguments: arguments.map(\.redisBytes))], timeout: 5)[0]
    }

    /// A field of a data node's `INFO replication` (`role`, `master_link_status`, ...).
    func info(_ port: Int, _ field: String) throws -> String? {
        infoField(field, in: try command(port, "INFO", "replication"))
    }

    /// A field of `SENTINEL MASTER mymaster` as a sentinel tells it (`flags`, `num-slaves`, ...).
    func masterField(_ sentinel: Int, _ field: String) throws -> String? {
        guard case .array(let parts?) = try command(sentinel, "SENTINEL", "MASTER", Self.masterName) else { return nil }
        let fields = parts.compactMap { $0.bytes.map { String(decoding: $0, as: UTF8.self) } }
        return stride(from: 0, to: fields.count - 1, by: 2).first { fields[$0] == field }.map { fields[$0 + 1] }
    }

    /// The port of the primary a sentinel names.
    func namedPrimary(by sentinel: Int) throws -> Int? {
        guard case .array(let parts?) = try command(sentinel, "SENTINEL", "get-master-addr-by-name", Self.masterName),
              parts.count == 2, let port = parts[1].bytes else { return nil }
        return Int(String(decoding: port, as: UTF8.self))
    }

    /// The data node running now that says it is the primary, and the other.
    func roles() throws -> (primary: Int, replica: Int) {
        let primary = try #require(try running.filter { dataPorts.contains($0) }.first { try info($0, "role") == "master" })
        return (primary, try #require(dataPorts.first { $0 != primary }))
    }

    /// The processes running now.
    var running: [Int] { nodes.running }

    /// Kills a process with SIGKILL, as a crash would.
    func kill(_ port: Int) { nodes.kill(port) }

    /// Starts a data node (again, after `kill`), as a replica of `replicaOf` when given.
    func startData(_ port: Int, replicaOf primary: Int?) throws {
        let arguments = try nodes.serverArguments(port)
            + (primary.map { ["--replicaof", "127.0.0.1", "\($0)"] } ?? [])
        try nodes.start(port, try #require(RedisServer.executable).path, arguments, what: "data node") {
            (try? command(port, "PING")) == .simpleString("PONG")
        }
    }

    private func startSentinel(_ port: Int, executable: URL) throws {
        let node = try nodes.folder(port)
        let file = node.appendingPathComponent("sentinel.conf")
        try """
            port \(port)
            bind 127.0.0.1
            daemonize no
            dir \(node.path)
            logfile \(node.appendingPathComponent("sentinel.log").path)
            requirepass \(Self.sentinelPassword)
            sentinel sentinel-pass \(Self.sentinelPassword)
            sentinel monitor \(Self.masterName) 127.0.0.1 \(dataPorts[0]) 2
            sentinel auth-pass \(Self.masterName) \(RedisProcessGroup.adminPassword)
            sentinel down-after-milliseconds \(Self.masterName) 1000
            sentinel failover-timeout \(Self.masterName) 2000
            sentinel parallel-syncs \(Self.masterName) 1

            """.write(to: file, atomically: true, encoding: .utf8)
        try nodes.start(port, executable.path, [file.path], what: "sentinel") { (try? command(port, "PING")) == .simpleString("PONG") }
    }

    /// Waits until every sentinel names the same running primary, with no failover under way,
    /// knows the two other sentinels and a replica, and the replica's link to the primary is up.
    /// - Throws: `RedisServer.Failure` when it is not so within `timeout`.
    func waitUntilHealthy(timeout: TimeInterval = 30) throws {
        var last = ""
        let healthy = eventually(timeout: timeout) {
            do {
                let (primary, replica) = try roles()
                guard try info(replica, "role") == "slave", try info(replica, "master_port") == "\(primary)",
                      try info(replica, "master_link_status") == "up" else { last = "replica \(replica) not linked to \(primary)"; return false }
                for sentinel in sentinelPorts {
                    guard try namedPrimary(by: sentinel) == primary, try masterField(sentinel, "flags") == "master",
                          try masterField(sentinel, "num-other-sentinels") == "2",
                          try masterField(sentinel, "num-slaves").flatMap(Int.init) ?? 0 >= 1 else {
                        last = "sentinel \(sentinel): \(try masterField(sentinel, "flags") ?? "?"), other sentinels "
                            + "\(try masterField(sentinel, "num-other-sentinels") ?? "?"), names \(try namedPrimary(by: sentinel) ?? 0)"
                        return false
                    }
                }
                return true
            } catch {
                last = "\(error)"
                return false
            }
        }
        if !healthy { throw RedisServer.Failure(description: "the Sentinel group was not healthy within \(timeout) s: \(last)") }
    }

}

/// Starts one `RedisSentinelGroup` for a whole suite, hands it to the suite's tests as
/// `RedisSentinelGroup.current`, and stops it after the last one. Where `redis-server` or
/// `redis-sentinel` is missing the suite is skipped with a message, unless
/// `HTTP_CACHING_REQUIRE_REDIS=1`, which makes that a failure.
struct RedisSentinelTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        test.isSuite ? self : nil
    }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let group = try RedisSentinelGroup()
        defer { group.stop() }
        try await RedisSentinelGroup.$current.withValue(group) { try await function() }
    }
}

extension Trait where Self == RedisSentinelTrait {
    /// One Redis Sentinel group for the suite (see `RedisSentinelTrait`).
    static var redisSentinel: Self { RedisSentinelTrait() }
}

extension Trait where Self == ConditionTrait {
    /// Runs a suite only where `redis-server` and `redis-sentinel` are installed, or where they
    /// are required (then a missing one fails with the same message).
    static var redisSentinelPrograms: Self {
        .enabled(if: (RedisServer.executable != nil && RedisSentinelGroup.sentinelExecutable != nil) || RedisServer.isRequired,
                 Comment(rawValue: RedisSentinelGroup.skipMessage))
    }
}
