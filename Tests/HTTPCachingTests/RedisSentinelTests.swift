import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// The Redis store on a real Redis Sentinel group (a primary, a replica, three sentinels), one
/// group for the whole suite; its tests run one at a time, since two of them fail the primary over.
@Suite("Redis Sentinel store", .redisSentinelPrograms, .redisSentinel, .serialized)
struct RedisSentinelTests {
    static func group() throws -> RedisSentinelGroup {
        let group = try #require(RedisSentinelGroup.current, "no Sentinel group: the suite's trait did not start one")
        try group.waitUntilHealthy()
        return group
    }

    static func router(_ store: RedisResponseStore) throws -> RedisSentinelRouter {
        guard case .sentinel(let router) = store.backend else { throw RedisServer.Failure(description: "not a sentinel store") }
        return router
    }

    /// How many keys under a prefix a data node of the group (or a server of its own) holds.
    static func keyCount(on port: Int, prefix: String, in group: RedisSentinelGroup?, server: RedisServer? = nil) throws -> Int {
        let reply = try server.map { try $0.command("SCAN", 0, "MATCH", prefix + "*", "COUNT", 10_000) }
            ?? group!.command(port, "SCAN", 0, "MATCH", prefix + "*", "COUNT", 10_000)
        guard case .array(let parts?) = reply,
              case .array(let found?) = parts[1] else { return -1 }
        return found.count
    }

    @Test("hits through the primary the sentinels name; a sentinel that does not answer is passed over and the one that did is asked first")
    func hits() async throws {
        let group = try Self.group()
        let prefix = "hits-\(UUID().uuidString):"
        var configuration = try group.configuration(prefix: prefix)
        let dead = RedisServer.freePort()
        configuration.additionalSentinels.insert(RedisNodeAddress(host: configuration.host, port: configuration.port), at: 0)
        configuration.port = dead
        let store = try RedisResponseStore(configuration: configuration)
        let router = try Self.router(store)
        let h = try Harness(store: store)
        h.origin.route("/a", response: .init(text: "body a"))
        #expect(try await h.get("/a").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        let hit = try await h.get("/a")
        #expect(hit.status == .fresh && hit.text == "body a")
        #expect(h.origin.requestCount("/a") == 1)
        let (primary, replica) = try group.roles()
        #expect(router.primaryAddress == RedisNodeAddress(host: "127.0.0.1", port: primary))
        #expect(router.sentinelOrder.first == RedisNodeAddress(host: "127.0.0.1", port: group.sentinelPorts[0]))
        #expect(try Self.keyCount(on: primary, prefix: prefix, in: group) >= 1)
        _ = try group.command(primary, "WAIT", 1, 2000)
        #expect(try Self.keyCount(on: replica, prefix: prefix, in: group) >= 1, "replicated, not written there")
        try store.ping()
        #expect(try store.entryCount == 1 && store.entryInfos().count == 1)
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) == 0)
        #expect(router.resolveCount >= 1 && router.switchCount == 0)
    }

    @Test("credentials: the URL's are the data nodes', sentinelPassword the sentinels'; a wrong one of either is unavailable, never the password in the message")
    func credentials() async throws {
        let group = try Self.group()
        var noSentinelPassword = try group.configuration()
        noSentinelPassword.sentinelPassword = nil
        #expect(Self.failure(noSentinelPassword).contains("NOAUTH"), "\(Self.failure(noSentinelPassword))")
        var wrongSentinelPassword = try group.configuration()
        wrongSentinelPassword.sentinelPassword = "hunter2"
        let sentinelFailure = Self.failure(wrongSentinelPassword)
        #expect(sentinelFailure.contains("no sentinel named the primary") && !sentinelFailure.contains("hunter2"), "\(sentinelFailure)")
        var wrongDataPassword = try group.configuration()
        wrongDataPassword.password = "hunter2"
        let dataFailure = Self.failure(wrongDataPassword)
        #expect(dataFailure.contains("refused to authenticate as user 'cache'") && !dataFailure.contains("hunter2"), "\(dataFailure)")

        let h = try Harness(store: try RedisResponseStore(configuration: wrongDataPassword))
        h.origin.route("/c", response: .init(text: "body c"))
        for _ in 0..<2 { #expect(try await h.get("/c").text == "body c") }
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) >= 1)
        #expect(h.origin.requestCount("/c") == 2)
    }

    private static func failure(_ configuration: RedisConfiguration) -> String {
        do {
            try RedisResponseStore(configuration: configuration).ping()
            return "ping succeeded"
        } catch {
            return "\(error)"
        }
    }

    @Test("a node that says it is a replica is never used: ROLE (or HELLO, for a user refused ROLE) is checked on each new connection; a sentinel that names the replica makes every call fail and nothing is written there")
    func replicaRefused() async throws {
        let group = try Self.group()
        let (_, replica) = try group.roles()
        let replicaAddress = RedisNodeAddress(host: "127.0.0.1", port: replica)
        for (user, password) in [(RedisProcessGroup.user, RedisProcessGroup.userPassword), (nil, RedisProcessGroup.adminPassword)] {
            var configuration = try group.configuration().forPrimary(replicaAddress)
            (configuration.username, configuration.password) = (user, password)
            let pool = RedisConnectionPool(configuration: configuration, limits: RESPParser.Limits(), tls: nil, verifiesPrimary: true)
            #expect(throws: RedisClientError.self) { try pool.execute(RedisCommand("SET", "never", "x")) }
            do { _ = try pool.execute(RedisCommand("PING")) } catch { #expect(error.kind == .replica, "\(error)") }
        }

        let sentinel = group.sentinelPorts[0]
        #expect(try group.command(sentinel, "SENTINEL", "MONITOR", "lying", "127.0.0.1", replica, 2).isOK)
        defer { _ = try? group.command(sentinel, "SENTINEL", "REMOVE", "lying") }
        _ = try group.command(sentinel, "SENTINEL", "SET", "lying", "auth-pass", RedisProcessGroup.adminPassword)
        let prefix = "lying-\(UUID().uuidString):"
        var configuration = try group.configuration(prefix: prefix)
        configuration.sentinelMasterName = "lying"
        configuration.port = sentinel
        configuration.additionalSentinels = []
        let h = try Harness(store: try RedisResponseStore(configuration: configuration))
        h.origin.route("/r", response: .init(text: "body r"))
        for _ in 0..<3 { #expect(try await h.get("/r").text == "body r") }
        #expect(h.origin.requestCount("/r") == 3)
        let failures = h.recorder.events.filter { $0.kind.name == "storeFailed" }.map { "\($0.kind)" }
        #expect(!failures.isEmpty && failures.allSatisfy { $0.contains("named the primary, says it is a") }, "\(failures)")
        #expect(try Self.keyCount(on: replica, prefix: prefix, in: group) == 0)
    }

    @Test("a primary demoted (REPLICAOF) under a running store, its sentinel still naming it: the next calls are refused by the ROLE check (Redis closes the old connections), answered from the network with storeFailed, and nothing is written there or to its new primary")
    func demotedUnderOpenConnection() async throws {
        let group = try Self.group()
        let old = try RedisServer(), other = try RedisServer()
        defer { old.stop(); other.stop() }
        let sentinel = group.sentinelPorts[0]
        #expect(try group.command(sentinel, "SENTINEL", "MONITOR", "solo", "127.0.0.1", old.port, 2).isOK)
        defer { _ = try? group.command(sentinel, "SENTINEL", "REMOVE", "solo") }
        let prefix = "solo-\(UUID().uuidString):"
        var configuration = try group.configuration(prefix: prefix)
        (configuration.sentinelMasterName, configuration.port, configuration.additionalSentinels) = ("solo", sentinel, [])
        (configuration.username, configuration.password) = (nil, nil)
        let h = try Harness(store: try RedisResponseStore(configuration: configuration))
        h.origin.route("/d", response: .init(text: "body d"))
        h.origin.route("/e", response: .init(text: "body e"))
        #expect(try await h.get("/d").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        #expect(try await h.get("/d").status == .fresh, "a hit through the pooled connection")

        #expect(try old.command("REPLICAOF", "127.0.0.1", other.port).isOK)
        #expect(try await h.get("/e").text == "body e")
        let again = try await h.get("/d")
        #expect(again.text == "body d" && again.status != .fresh)
        #expect(await h.recorder.wait { $0.contains { "\($0.kind)".contains("write: the store is unavailable") } })
        let failures = h.recorder.events.filter { $0.kind.name == "storeFailed" }.map { "\($0.kind)" }
        #expect(!failures.isEmpty && failures.allSatisfy { $0.contains("says it is a") || $0.contains("refused a write as a replica") },
                "\(failures)")
        #expect(try Self.keyCount(on: other.port, prefix: prefix, in: nil, server: other) == 0)
    }
}
