import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// The Redis store on a real Redis Cluster (three primaries, a replica each), one cluster for
/// the whole suite; its tests run one at a time, since one of them moves a slot and another
/// kills a primary.
@Suite("Redis Cluster store", .redisClusterPrograms, .redisCluster, .serialized)
struct RedisClusterTests {
    typealias E = StoreConformance

    static func cluster() throws -> RedisCluster {
        let cluster = try #require(RedisCluster.current, "no cluster: the suite's trait did not start one")
        try cluster.waitUntilHealthy()
        return cluster
    }

    static func router(_ store: RedisResponseStore) throws -> RedisClusterRouter {
        guard case .cluster(let router) = store.backend else { throw RedisServer.Failure(description: "not a cluster store") }
        return router
    }

    /// A hash tag for every slot: `t0`, `t1`, ... until each of the 16384 slots has one.
    static func tagPerSlot() -> [String] {
        var tags = [String?](repeating: nil, count: RedisClusterSlot.count)
        var found = 0, index = 0
        while found < RedisClusterSlot.count {
            let tag = "t\(index)"
            let slot = RedisClusterSlot.of(Array(tag.utf8))
            if tags[slot] == nil {
                tags[slot] = tag
                found += 1
            }
            index += 1
        }
        return tags.map { $0! }
    }

    /// The keys under a prefix held by one node, read with SCAN.
    static func keys(on port: Int, prefix: String, in cluster: RedisCluster) throws -> [String] {
        var keys: [String] = [], cursor = "0"
        repeat {
            let reply = try cluster.command(port, "SCAN", cursor, "MATCH", prefix + "*", "COUNT", 1000)
            guard case .array(let parts?) = reply, let next = parts[0].bytes, case .array(let found?) = parts[1] else {
                throw RedisServer.Failure(description: "SCAN: \(reply)")
            }
            keys += found.compactMap(\.bytes).map { String(decoding: $0, as: UTF8.self) }
            cursor = String(decoding: next, as: UTF8.self)
        } while cursor != "0"
        return keys
    }

    @Test("routing: a key in each of the 16384 slots is written through the router and lands on the primary serving it, with no redirection; every one reads back; CRC16 and hash tags agree with CLUSTER KEYSLOT")
    func everySlot() throws {
        let cluster = try Self.cluster()
        // 5,460 commands pipelined to each primary: under a sanitizer on a busy machine a reply
        // can take longer than the suite's short timeout to start arriving.
        var configuration = try cluster.configuration()
        configuration.commandTimeout = 10
        let store = try RedisResponseStore(configuration: configuration)
        let router = try Self.router(store)
        let prefix = "slots-\(UUID().uuidString):"
        let keys = Self.tagPerSlot().map { Array("\(prefix){\($0)}".utf8) }
        let samples = ["foo", "123456789", "{user1000}.following", "{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap",
                       "foo{bar}{zap}", "{}", "{", "}{a}", String(decoding: keys[4242], as: UTF8.self)]
        for sample in samples {
            let server = try cluster.command(cluster.running[0], "CLUSTER", "KEYSLOT", sample)
            #expect(server == .integer(Int64(RedisClusterSlot.of(Array(sample.utf8)))), "\(sample)")
        }
        let replies = try router.executeEach(keys.map { RedisCommand("SET", $0, $0, "PX", 120_000) }, slots: keys.map(RedisClusterSlot.of))
        #expect(replies.allSatisfy { $0.isOK })
        #expect(router.redirectionCount == 0 && router.refreshCount == 1, "the map was right for every slot")
        for slot in stride(from: 0, to: RedisClusterSlot.count, by: 5) {
            #expect(try router.execute([RedisCommand("GET", keys[slot])], slot: slot)[0] == .bulkString(keys[slot]))
        }
        #expect(router.redirectionCount == 0)
        var total = 0
        for shard in try cluster.shards() {
            let held = try Self.keys(on: shard.primary, prefix: prefix, in: cluster)
            let expected = shard.ranges.reduce(0) { $0 + $1.count }
            #expect(held.count == expected, "primary \(shard.primary) holds its \(expected) slots' keys")
            #expect(held.allSatisfy { key in shard.ranges.contains { $0.contains(RedisClusterSlot.of(Array(key.utf8))) } })
            total += held.count
        }
        #expect(total == RedisClusterSlot.count)
    }

    @Test("an entry, its variants and their claims share one hash slot; different URLs spread over every primary")
    func hashTags() throws {
        let cluster = try Self.cluster()
        let store = try cluster.makeStore()
        let entry = E.entry("/tagged")
        var variant = entry.key
        variant.variant = "accept=json"
        let slots = Set([store.layout.entryKey(entry.key), store.layout.entryKey(variant), store.layout.claimKey(entry.key),
                         store.layout.claimKey(variant)].map(RedisClusterSlot.of))
        #expect(slots.count == 1)
        for i in 0..<60 { try store.write(E.entry("/spread/\(i)")) }
        for shard in try cluster.shards() {
            #expect(try Self.keys(on: shard.primary, prefix: store.configuration.keyPrefix, in: cluster).count > 5)
        }
        #expect(try store.entryInfos().count == 60 && store.entryCount == 60)
    }

    @Test("through URLSession: misses stored across the cluster, then fresh hits with no network, from a second host's store too")
    func endToEnd() async throws {
        let cluster = try Self.cluster()
        let store = try cluster.makeStore()
        let h = try Harness(store: store)
        h.origin.route("/c") { request, _ in .init(text: "body of \(request.target)") }
        let paths = (0..<30).map { "/c?n=\($0)" }
        for path in paths {
            let miss = try await h.get(path)
            #expect(miss.status == .miss && miss.text == "body of \(path)")
        }
        #expect(await h.recorder.wait(for: .stored, count: paths.count))
        for path in paths {
            let hit = try await h.get(path)
            #expect(hit.status == .fresh && hit.text == "body of \(path)")
        }
        let otherHost = try Harness(store: try cluster.makeStore(prefix: store.configuration.keyPrefix))
        for path in paths.prefix(5) {
            let shared = try await fetch(otherHost.session, h.origin.url(path))
            #expect(shared.status == .fresh && shared.text == "body of \(path)")
        }
        #expect(h.origin.requestCount("/c") == paths.count, "every hit without the network")
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) == 0)
    }

    @Test("passes the store conformance suite as an ACL user (password on every node), with damage and exclusive claims")
    func conformance() throws {
        let cluster = try Self.cluster()
        let report = try StoreConformance(makeStore: { try cluster.makeStore() },
                                          corrupt: { store, key in
                                              let redis = try #require(store as? RedisResponseStore)
                                              let redisKey = redis.layout.entryKey(key)
                                              _ = try redis.backend.execute(RedisCommand("HSET", redisKey, "d", "not an entry"), key: redisKey)
                                          },
                                          claimsAreExclusive: true).run()
        #expect(report.skippedChecks == ["evicts past its count limit"], "\(report)")
    }

    @Test("listing and removal SCAN every primary: counts, removal by predicate, removal of all; claims are exclusive across hosts")
    func listingAndRemoval() throws {
        let cluster = try Self.cluster()
        let store = try cluster.makeStore()
        for i in 0..<50 { try store.write(E.entry(i % 2 == 0 ? "/even/\(i)" : "/odd/\(i)")) }
        #expect(store.entryCount == 50 && store.totalBytes > 0)
        var reports: [RemovalProgress] = []
        try store.removeEntries(where: { $0.url.contains("/odd/") }, progress: { reports.append($0) })
        #expect(reports.last == RemovalProgress(removed: 25, total: 25))
        #expect(try store.entryInfos().allSatisfy { $0.url.contains("/even/") } && store.entryCount == 25)
        try store.removeAll()
        #expect(store.entryCount == 0)
        let other = try cluster.makeStore(prefix: store.configuration.keyPrefix)
        let key = E.entry("/claimed").key
        #expect(store.claimRefresh(of: key, lease: 10))
        #expect(!other.claimRefresh(of: key, lease: 10))
        store.releaseRefresh(of: key)
        #expect(other.claimRefresh(of: key, lease: 10))
        #expect(try store.partitionSecret() == other.partitionSecret())
        try store.ping()
    }

    @Test("a wrong password, or a redis-cluster:// URL naming a single server: a clear unavailable error, at once")
    func refusals() throws {
        let cluster = try Self.cluster()
        var configuration = try cluster.configuration()
        configuration.password = "wrong"
        let wrong = try RedisResponseStore(configuration: configuration)
        let reason = RedisFailureTests.expectUnavailable("ping with a wrong password") { try wrong.ping() }
        #expect(reason.contains("refused to authenticate as user 'cache'") && reason.contains("WRONGPASS"), "\(reason)")
        #expect(!reason.contains("wrong".uppercased() + "X") && !reason.contains(":wrong@"))
        RedisFailureTests.expectEveryCallUnavailable(wrong)

        let single = try RedisServer()
        defer { single.stop() }
        let notCluster = try RedisResponseStore(url: "redis-cluster://127.0.0.1:\(single.port)")
        let why = RedisFailureTests.expectUnavailable("a single server as a cluster") { _ = try notCluster.entry(for: E.entry("/x").key) }
        #expect(why.contains("not a cluster node") && why.contains("use redis://"), "\(why)")
    }

    @Test("cache-demo --store redis-cluster://...: a fetch stores there, and stats reads it back")
    func demo() async throws {
        let cluster = try Self.cluster()
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/demo-cluster")
        let store = cluster.url
        let fetched = try await DemoProcessTests.run(["fetch", origin.url("/demo-cluster").absoluteString, "--store", store])
        #expect(fetched.status == 0, "\(fetched.output)")
        let run = try await DemoProcessTests.run(["stats", "--store", store])
        #expect(run.status == 0)
        let nodes = cluster.ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
        #expect(run.output.contains("store    redis-cluster \(nodes) (keys under cache-demo:)\n"), "\(run.output)")
        #expect(run.output.contains("oldest   \(origin.url("/demo-cluster").absoluteString), stored "), "\(run.output)")
        #expect(!run.output.contains(RedisProcessGroup.userPassword))
        let cleanup = try RedisResponseStore(url: store, keyPrefix: "cache-demo:")
        try cleanup.removeAll()
    }
}
