import Foundation
import Testing
@testable import HTTPCaching

/// A near cache (a tiered store) in front of a Redis Cluster and of a Sentinel-watched
/// primary: another store on the same prefix (another process, as far as Redis can tell: its
/// own connections) replaces and removes entries, and the near cache stops serving them.
enum NearFleet {
    static func entry(_ path: String, _ body: String) -> CacheEntry {
        let url = URL(string: "http://near-fleet.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data(body.utf8), storedAt: Date())
    }

    /// A writer and a near cache in front of another store on the same new prefix, once memory serves.
    static func pair(_ makeStore: (String) throws -> RedisResponseStore) throws -> (writer: RedisResponseStore, tiered: TieredResponseStore) {
        let prefix = "near-\(UUID().uuidString):"
        let writer = try makeStore(prefix)
        let tiered = TieredResponseStore(back: try makeStore(prefix))
        #expect(eventually(timeout: 10) { tiered.servesFromMemory }, "memory serves once every primary is tracked")
        return (writer, tiered)
    }

    /// Whether `tiered` comes to follow `port` and not `gone` (a dead primary, listed as a failed
    /// master with no slots until it returns), and to serve from memory.
    static func follows(_ tiered: TieredResponseStore, _ port: Int, not gone: Int) async -> Bool {
        await eventually(timeout: 20) {
            let followed = tiered.coherence.followedPrimaries.map(\.port)
            return tiered.servesFromMemory && followed.contains(port) && !followed.contains(gone)
        }
    }

    /// Reads `key` through `tiered` until memory holds it (the writer's own invalidation may
    /// drop the first fill); true when it does.
    static func filled(_ tiered: TieredResponseStore, _ key: CacheKey) -> Bool {
        eventually(timeout: 10) {
            _ = try? tiered.entry(for: key)
            return tiered.memory.entry(for: key) != nil
        }
    }

    /// The body `tiered` serves for `key`, or "none".
    static func served(_ tiered: TieredResponseStore, _ key: CacheKey) -> String {
        guard let entry = try? tiered.entry(for: key) else { return "none" }
        return String(decoding: entry.body, as: UTF8.self)
    }

    /// Fills memory with `entries` (written by `writer`), checks that reading them again never
    /// reaches Redis, then has `writer` replace and remove each: each stops being served.
    static func replaceAndRemove(_ tiered: TieredResponseStore, writer: RedisResponseStore, _ entries: [CacheEntry]) throws {
        for entry in entries { try writer.write(entry) }
        for entry in entries { #expect(filled(tiered, entry.key), "\(entry.url) was put into memory") }
        // A pass over entries held in memory reaches Redis for none (a late invalidation of the
        // writer's own write may still drop one: then memory is filled again and another pass made).
        let backReads = Atomic<Int>(0)
        tiered.afterBackRead.withLock { $0 = { backReads.add(1, ordering: .relaxed) } }
        #expect(eventually(timeout: 10) {
            backReads.store(0, ordering: .relaxed)
            for entry in entries where served(tiered, entry.key) != "v1" { return false }
            return backReads.load(ordering: .relaxed) == 0
        }, "reads held in memory went to Redis")
        tiered.afterBackRead.withLock { $0 = nil }
        for entry in entries { try writer.write(Self.entry(entry.url.path + "?" + (entry.url.query ?? ""), "v2")) }
        for entry in entries {
            #expect(eventually(timeout: 5) { tiered.memory.entry(for: entry.key) == nil }, "\(entry.url): the replaced entry left memory")
            #expect(served(tiered, entry.key) == "v2")
        }
        for entry in entries { try writer.removeEntry(for: entry.key) }
        for entry in entries {
            #expect(eventually(timeout: 5) { served(tiered, entry.key) == "none" }, "\(entry.url): the removed entry stopped being served")
        }
    }
}

import Synchronization

extension RedisClusterTests {
    /// Entries whose keys fall on every primary of the cluster.
    private static func entriesOnEveryPrimary(_ store: RedisResponseStore, _ cluster: RedisCluster, tag: String) throws -> [CacheEntry] {
        let shards = try cluster.shards()
        var byPrimary: [Int: CacheEntry] = [:]
        var n = 0
        while byPrimary.count < shards.count && n < 1000 {
            let entry = NearFleet.entry("/\(tag)?n=\(n)", "v1")
            let slot = RedisClusterSlot.of(store.layout.entryKey(entry.key))
            if let shard = shards.first(where: { $0.ranges.contains { $0.contains(slot) } }), byPrimary[shard.primary] == nil {
                byPrimary[shard.primary] = entry
            }
            n += 1
        }
        #expect(byPrimary.count == shards.count)
        return Array(byPrimary.values)
    }

    @Test("a near cache in front of the cluster: memory serves once every primary is tracked; what another store replaces or removes on any primary leaves it")
    func nearCache() throws {
        let cluster = try Self.cluster()
        let (writer, tiered) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        #expect(Set(tiered.coherence.followedPrimaries.map(\.port)) == Set(try cluster.shards().map(\.primary)))
        try NearFleet.replaceAndRemove(tiered, writer: writer, try Self.entriesOnEveryPrimary(writer, cluster, tag: "a"))
    }

    @Test("a near cache through a slot moved by hand (SETSLOT, MIGRATE): the moved entry leaves memory, and a replacement on its new primary is told")
    func nearCacheMovedSlot() throws {
        let cluster = try Self.cluster()
        let (writer, tiered) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        let entry = NearFleet.entry("/moved", "v1")
        try writer.write(entry)
        #expect(NearFleet.filled(tiered, entry.key))
        let redisKey = writer.layout.entryKey(entry.key), slot = RedisClusterSlot.of(writer.layout.entryKey(entry.key))
        let source = try cluster.primary(serving: slot)
        let target = try #require(try cluster.shards().map(\.primary).first { $0 != source })
        let sourceID = try #require(try cluster.command(source, "CLUSTER", "MYID").bytes)
        let targetID = try #require(try cluster.command(target, "CLUSTER", "MYID").bytes)
        #expect(try cluster.command(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", sourceID).isOK)
        #expect(try cluster.command(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", targetID).isOK)
        #expect(try cluster.command(source, "MIGRATE", "127.0.0.1", target, "", 0, 5000, "AUTH", RedisProcessGroup.adminPassword,
                                    "KEYS", redisKey).isOK)
        #expect(eventually(timeout: 5) { tiered.memory.entry(for: entry.key) == nil }, "the migrated entry left memory")
        for shard in try cluster.shards() {
            #expect(try cluster.command(shard.primary, "CLUSTER", "SETSLOT", slot, "NODE", targetID).isOK)
        }
        #expect(eventually { (try? cluster.primary(serving: slot)) == target })
        #expect(NearFleet.filled(tiered, entry.key), "read from the new primary into memory")
        try writer.write(NearFleet.entry("/moved", "v2"))
        #expect(eventually(timeout: 5) { NearFleet.served(tiered, entry.key) == "v2" }, "the replacement on the new primary was told")
        for _ in 0..<20 { #expect(NearFleet.served(tiered, entry.key) == "v2", "an older entry came back") }
    }

    @Test("reads through a near cache in front of the cluster, racing 300 replacements spread over every primary, never leave an older entry in memory once the writes stop")
    func nearCacheRace() throws {
        let cluster = try Self.cluster()
        let (writer, tiered) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        let paths = try Self.entriesOnEveryPrimary(writer, cluster, tag: "r").map { $0.url.path + "?" + ($0.url.query ?? "") }
        for path in paths { try writer.write(NearFleet.entry(path, "0")) }
        let done = Atomic<Bool>(false)
        let readers = DispatchGroup()
        for _ in 0..<3 {
            DispatchQueue.global().async(group: readers) {
                while !done.load(ordering: .relaxed) {
                    for path in paths { _ = try? tiered.entry(for: NearFleet.entry(path, "").key) }
                }
            }
        }
        for version in 1...100 { for path in paths { try writer.write(NearFleet.entry(path, "\(version)")) } }
        done.store(true, ordering: .relaxed)
        readers.wait()
        for path in paths {
            let key = NearFleet.entry(path, "").key
            #expect(eventually(timeout: 5) { NearFleet.served(tiered, key) == "100" }, "\(path)")
            for _ in 0..<20 { #expect(NearFleet.served(tiered, key) == "100", "an older entry came back for \(path)") }
        }
    }

    @Test("a near cache in front of the cluster through a manual failover (CLUSTER FAILOVER): it follows the promoted replica, and what is replaced there leaves memory")
    func nearCacheFailover() throws {
        let cluster = try Self.cluster()
        let (writer, tiered) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        let entries = try Self.entriesOnEveryPrimary(writer, cluster, tag: "f")
        for entry in entries { try writer.write(entry) }
        for entry in entries { #expect(NearFleet.filled(tiered, entry.key)) }

        let shard = try #require(try cluster.shards().first { !$0.replicas.isEmpty })
        let replica = try #require(shard.replicas.first)
        #expect(try cluster.command(replica, "CLUSTER", "FAILOVER").isOK)
        #expect(eventually(timeout: 20) { (try? cluster.info(replica, "role")) == "master" }, "the replica was promoted")
        #expect(eventually(timeout: 10) { tiered.coherence.followedPrimaries.map(\.port).contains(replica) },
                "the near cache follows the promoted replica")
        #expect(!tiered.coherence.followedPrimaries.map(\.port).contains(shard.primary), "and no longer the demoted primary")
        #expect(eventually(timeout: 10) { tiered.servesFromMemory }, "memory serves again once the new primary is tracked")
        // The old primary, now a replica, is no longer followed (checked above); the promoted
        // replica's listener tells of the replacement (the demoted one, were it still heard,
        // would tell of it too, as it copies the write).
        let moved = try #require(entries.first { try cluster.primary(serving: RedisClusterSlot.of(writer.layout.entryKey($0.key))) == replica })
        #expect(NearFleet.filled(tiered, moved.key))
        try writer.write(NearFleet.entry(moved.url.path + "?" + (moved.url.query ?? ""), "v2"))
        #expect(eventually(timeout: 5) { NearFleet.served(tiered, moved.key) == "v2" }, "the replacement on the promoted replica was told")
        for _ in 0..<20 { #expect(NearFleet.served(tiered, moved.key) == "v2", "an older entry came back") }
    }
}

extension RedisSentinelTests {
    /// A near cache made before a failover (`sentinelFailover` runs one): the writer, the near
    /// cache and an entry held in memory.
    static func nearCacheBeforeFailover(_ group: RedisSentinelGroup) throws -> (RedisResponseStore, TieredResponseStore, CacheEntry) {
        let (writer, tiered) = try NearFleet.pair { try group.makeStore(prefix: $0) }
        let entry = NearFleet.entry("/sf", "v1")
        try writer.write(entry)
        #expect(NearFleet.filled(tiered, entry.key))
        return (writer, tiered, entry)
    }

    /// After the failover: the near cache follows the promoted replica, serves again, and
    /// what the writer replaces there leaves memory.
    static func nearCacheAfterFailover(_ near: (RedisResponseStore, TieredResponseStore, CacheEntry), promoted: Int) {
        let (writer, tiered, entry) = near
        #expect(eventually(timeout: 20) { tiered.coherence.followedPrimaries.map(\.port) == [promoted] }, "the near cache follows the promoted replica")
        #expect(eventually(timeout: 10) { tiered.servesFromMemory }, "memory serves again once the new primary is tracked")
        #expect(NearFleet.filled(tiered, entry.key), "read from the promoted replica into memory")
        #expect(eventually(timeout: 10) { (try? writer.write(NearFleet.entry("/sf", "v2"))) != nil }, "the writer follows the switch")
        #expect(eventually(timeout: 5) { NearFleet.served(tiered, entry.key) == "v2" }, "the replacement on the promoted replica was told")
        for _ in 0..<20 { #expect(NearFleet.served(tiered, entry.key) == "v2", "an older entry came back") }
    }

    @Test("a near cache in front of the primary the sentinels name: memory serves; what another store replaces or removes leaves it")
    func nearCache() throws {
        let group = try Self.group()
        let (writer, tiered) = try NearFleet.pair { try group.makeStore(prefix: $0) }
        #expect(tiered.coherence.followedPrimaries.map(\.port) == [try group.roles().primary])
        try NearFleet.replaceAndRemove(tiered, writer: writer, (0..<4).map { NearFleet.entry("/s?n=\($0)", "v1") })
    }
}

@Suite("Near cache fleet")
struct NearCacheFleetUnitTests {
    @Test("a change that only takes a primary away keeps memory serving once the rest are tracked; an older reading never undoes a newer one", .redisServer)
    func primaryTakenAway() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore(prefix: "fleet-\(UUID().uuidString):")
        let ups = Atomic<Int>(0), losts = Atomic<Int>(0)
        let fleet = RedisInvalidationFleet(backend: store.backend, configuration: store.configuration, prefix: store.layout.entryPrefix,
                                           up: { ups.add(1, ordering: .relaxed) }, lost: { losts.add(1, ordering: .relaxed) },
                                           invalidated: { _ in })
        defer { fleet.stop() }
        let live = RedisNodeAddress(host: "127.0.0.1", port: server.port)
        let dead = RedisNodeAddress(host: "127.0.0.1", port: 1) // refused: nothing listens there
        fleet.follow([live, dead], version: 1)
        #expect(eventually(timeout: 5) { losts.load(ordering: .relaxed) >= 1 })
        #expect(eventually(timeout: 5) { fleet.tracked == [live] })
        #expect(ups.load(ordering: .relaxed) == 0, "memory serves while a primary is not tracked")
        fleet.follow([live], version: 2)
        #expect(eventually(timeout: 5) { ups.load(ordering: .relaxed) == 1 }, "the one primary left is tracked: memory serves")
        fleet.follow([live, dead], version: 1)
        #expect(Set(fleet.primaries) == [live], "an older reading was followed")
    }
}
