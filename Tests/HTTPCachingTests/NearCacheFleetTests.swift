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

    /// `entry` with another body, stored now (the same key).
    static func replaced(_ entry: CacheEntry, _ body: String) -> CacheEntry {
        var replacement = entry
        replacement.body = Data(body.utf8)
        replacement.storedAt = Date()
        return replacement
    }

    /// Reads `key` into memory, has `replace` write its replacement, "v2", on `place`, and
    /// checks that the replacement is told and no older entry comes back.
    static func replacementTold(_ tiered: TieredResponseStore, _ key: CacheKey, on place: String,
                                replace: () throws -> Void) rethrows {
        #expect(filled(tiered, key), "read from \(place) into memory")
        try replace()
        #expect(eventually(timeout: 5) { served(tiered, key) == "v2" }, "the replacement on \(place) was told")
        for _ in 0..<20 { #expect(served(tiered, key) == "v2", "an older entry came back") }
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
        for entry in entries { try writer.write(replaced(entry, "v2")) }
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
        let (move, migrated) = try cluster.beginMoving(writer.layout.entryKey(entry.key))
        #expect(migrated.isOK, "\(migrated)")
        #expect(eventually(timeout: 5) { tiered.memory.entry(for: entry.key) == nil }, "the migrated entry left memory")
        try cluster.finishMoving(move)
        #expect(eventually { (try? cluster.primary(serving: move.slot)) == move.target })
        try NearFleet.replacementTold(tiered, entry.key, on: "the new primary") { try writer.write(NearFleet.replaced(entry, "v2")) }
    }

    @Test("reads through a near cache in front of the cluster, racing 300 replacements spread over every primary, never leave an older entry in memory once the writes stop")
    func nearCacheRace() throws {
        let cluster = try Self.cluster()
        let (writer, tiered) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        let entries = try Self.entriesOnEveryPrimary(writer, cluster, tag: "r").map { NearFleet.replaced($0, "0") }
        for entry in entries { try writer.write(entry) }
        let done = Atomic<Bool>(false)
        let readers = DispatchGroup()
        for _ in 0..<3 {
            DispatchQueue.global().async(group: readers) {
                while !done.load(ordering: .relaxed) {
                    for entry in entries { _ = try? tiered.entry(for: entry.key) }
                }
            }
        }
        for version in 1...100 { for entry in entries { try writer.write(NearFleet.replaced(entry, "\(version)")) } }
        done.store(true, ordering: .relaxed)
        readers.wait()
        for entry in entries {
            #expect(eventually(timeout: 5) { NearFleet.served(tiered, entry.key) == "100" }, "\(entry.url)")
            for _ in 0..<20 { #expect(NearFleet.served(tiered, entry.key) == "100", "an older entry came back for \(entry.url)") }
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
        try NearFleet.replacementTold(tiered, moved.key, on: "the promoted replica") { try writer.write(NearFleet.replaced(moved, "v2")) }
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
        NearFleet.replacementTold(tiered, entry.key, on: "the promoted replica") {
            #expect(eventually(timeout: 10) { (try? writer.write(NearFleet.replaced(entry, "v2"))) != nil }, "the writer follows the switch")
        }
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
