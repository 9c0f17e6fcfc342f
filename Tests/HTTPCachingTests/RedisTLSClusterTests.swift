import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// `rediss-cluster://` against a real cluster whose nodes listen on TLS ports only
/// (`--port 0`, `tls-cluster yes`): three primaries, no replicas, made by `redis-cli --tls
/// --cluster create`.
@Suite("Redis Cluster over TLS", .redisTLS, .enabled(if: RedisCluster.cli != nil || RedisServer.isRequired,
                                                      Comment(rawValue: RedisCluster.skipMessage)))
struct RedisTLSClusterTests {
    typealias E = StoreConformance

    /// Three TLS nodes made a cluster, healthy on every node.
    static func cluster() throws -> [RedisServer] {
        let files = try RedisTLSTests.certificates()
        let nodes = try (0..<3).map { _ in
            try RedisServer(["--tls-cert-file", files.serverCertificate, "--tls-key-file", files.serverKey,
                             "--tls-ca-cert-file", files.caFile, "--tls-auth-clients", "no", "--tls-cluster", "yes",
                             "--cluster-enabled", "yes", "--cluster-node-timeout", "1000"],
                            tls: RedisTLSOptions(caFile: files.caFile))
        }
        guard let cli = RedisCluster.cli else { throw RedisServer.Failure(description: RedisCluster.skipMessage) }
        let log = nodes[0].directory.appendingPathComponent("create.log")
        let create = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" \"$@\" > \"\(log.path)\" 2>&1", cli.path, "--tls", "--cacert",
                                                  files.caFile, "--cluster", "create"]
                                      + nodes.map { "127.0.0.1:\($0.port)" } + ["--cluster-replicas", "0", "--cluster-yes"])
        guard create.waitForExit(timeout: 60), create.exitStatus == 0 else {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw RedisServer.Failure(description: "redis-cli --tls --cluster create failed: \(text.suffix(1200))")
        }
        let healthy = eventually(timeout: 30) {
            nodes.allSatisfy { node in
                (try? node.command("CLUSTER", "INFO").bytes).map { String(decoding: $0, as: UTF8.self).contains("cluster_state:ok") } == true
            }
        }
        guard healthy else { throw RedisServer.Failure(description: "the TLS cluster did not become healthy within 30 s") }
        return nodes
    }

    @Test("rediss-cluster://: the topology names the nodes' TLS ports, entries on every primary are written and read, a hit through URLSession, a near cache in front of it")
    func tlsCluster() async throws {
        let nodes = try Self.cluster()
        defer { nodes.forEach { $0.stop() } }
        let url = "rediss-cluster://127.0.0.1:\(nodes[0].port),127.0.0.1:\(nodes[1].port)?cacert=\(try RedisTLSTests.certificates().caFile)"
        var configuration = try RedisConfiguration(url: url, keyPrefix: "tls-cluster-\(UUID().uuidString):")
        configuration.connectTimeout = 0.5
        configuration.commandTimeout = 0.5
        configuration.retryDelay = 0.05
        let store = try RedisResponseStore(configuration: configuration)
        try store.ping()
        guard case .cluster(let router) = store.backend else {
            Issue.record("not a cluster store")
            return
        }
        #expect(Set(router.topology?.primaries.map(\.port) ?? []) == Set(nodes.map(\.port)))
        let entries = (0..<60).map { E.entry("/c\($0)", body: "body \($0)") }
        for entry in entries { try store.write(entry) }
        for entry in entries { #expect(try store.entry(for: entry.key) == entry) }
        #expect(store.entryCount == 60)
        for node in nodes { #expect(try node.command("DBSIZE") != .integer(0), "every primary holds some of them") }
        let h = try Harness(store: store)
        h.origin.route("/over-tls", response: .init(headers: [("Cache-Control", "max-age=600")], body: Data("clustered".utf8)))
        #expect(try await h.get("/over-tls").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        let hit = try await h.get("/over-tls")
        #expect(hit.status == .fresh && hit.text == "clustered")
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) == 0)
        // A near cache in front of the TLS cluster: its invalidation connections speak TLS too.
        let near = TieredResponseStore(back: try RedisResponseStore(configuration: configuration))
        #expect(await eventually(timeout: 10) { near.servesFromMemory }, "every primary is tracked over TLS")
        #expect(NearFleet.filled(near, entries[0].key))
        try store.write(E.entry("/c0", body: "replaced"))
        #expect(await eventually(timeout: 5) { (try? near.entry(for: entries[0].key))?.body == Data("replaced".utf8) }, "the replacement was told")
    }
}
