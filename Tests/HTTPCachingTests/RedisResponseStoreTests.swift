import Foundation
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// The Redis store against a real `redis-server` of each test's own.
@Suite("Redis store", .redisServer)
struct RedisResponseStoreTests {
    typealias E = StoreConformance

    @Test("passes the store conformance suite, with damage and exclusive claims, each store on its own prefix; eviction is Redis's own (no count limit), so that check is skipped")
    func conformance() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let report = try server.conformanceReport()
        #expect(report.skippedChecks == ["evicts past its count limit"], "\(report)")
    }

    @Test("an entry is one hash of metadata and entry, whose TTL is usefulUntil - storedAt from its own times, capped")
    func timeToLive() throws {
        let server = try RedisServer()
        defer { server.stop() }
        var configuration = server.configuration()
        configuration.maximumTimeToLive = 3600
        let store = try RedisResponseStore(configuration: configuration)
        func pttl(_ entry: CacheEntry) throws -> Int64 {
            guard case .integer(let milliseconds) = try server.command("PTTL", store.layout.entryKey(entry.key)) else { return -99 }
            return milliseconds
        }
        // Stored in 2023 by the entry's clock: a TTL from the wall clock would be negative.
        let minute = E.entry("/minute", usefulUntil: E.base.addingTimeInterval(60))
        let long = E.entry("/long", usefulUntil: E.base.addingTimeInterval(30 * 86_400))
        let open = E.entry("/open")
        for entry in [minute, long, open] { #expect(try store.write(entry).stored) }
        #expect((55_000...60_000).contains(try pttl(minute)), "usefulUntil - storedAt")
        #expect((3_595_000...3_600_000).contains(try pttl(long)), "capped at maximumTimeToLive")
        #expect((3_595_000...3_600_000).contains(try pttl(open)), "no known end: the cap")
        #expect(try server.command("TYPE", store.layout.entryKey(open.key)) == .simpleString("hash"))
        #expect(try server.command("HLEN", store.layout.entryKey(open.key)) == .integer(2))

        // A replacement takes its own TTL; an entry already of no use is not stored and removes the old one.
        try store.write(E.entry("/minute", storedAt: E.base.addingTimeInterval(1), usefulUntil: E.base.addingTimeInterval(11)))
        #expect((5_000...10_000).contains(try pttl(minute)))
        #expect(try store.write(E.entry("/minute", usefulUntil: E.base)).stored == false)
        #expect(try store.entry(for: minute.key) == nil)

        // The default cap is 7 days; the secret lives as long as the server; a claim as long as its lease.
        let defaults = try server.makeStore()
        try defaults.write(open)
        guard case .integer(let week) = try server.command("PTTL", defaults.layout.entryKey(open.key)) else { throw RedisServer.Failure(description: "PTTL") }
        #expect((604_795_000...604_800_000).contains(week))
        _ = try defaults.partitionSecret()
        #expect(try server.command("PTTL", defaults.layout.secretKey) == .integer(-1))
        #expect(defaults.claimRefresh(of: open.key, lease: 20))
        guard case .integer(let lease) = try server.command("PTTL", defaults.layout.claimKey(open.key)) else { throw RedisServer.Failure(description: "PTTL") }
        #expect((15_000...20_000).contains(lease))
    }

    @Test("a foreign or damaged value under the prefix is a miss: removed and reported as corrupt", arguments: [
        "a string", "a hash without its entry", "metadata of another key", "garbage metadata", "an undecodable entry",
    ])
    func foreignValues(kind: String) throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let entry = E.entry("/victim"), other = E.entry("/other")
        try store.write(entry)
        try store.write(other)
        let key = store.layout.entryKey(entry.key)
        switch kind {
        case "a string": _ = try server.command("SET", key, "hello")
        case "a hash without its entry": _ = try server.command("HDEL", key, "d")
        case "metadata of another key":
            guard case .bulkString(let bytes?) = try server.command("HGET", store.layout.entryKey(other.key), "m") else { return }
            _ = try server.command("HSET", key, "m", bytes)
        case "garbage metadata": _ = try server.command("HSET", key, "m", "HTCMxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
        default: _ = try server.command("HSET", key, "d", [UInt8](repeating: 0xAB, count: 300))
        }
        do {
            _ = try store.entry(for: entry.key)
            Issue.record("a \(kind) was read as an entry")
        } catch let error as HTTPCachingError where error.code == .corruptEntry {
            let (reported, reason) = (error.key, error.detail ?? "")
            #expect(reported == entry.key && !reason.isEmpty)
        }
        #expect(try server.command("EXISTS", key) == .integer(0), "removed")
        #expect(try store.entry(for: entry.key) == nil)
        #expect(try store.entry(for: other.key) == other)
    }

    @Test("entries of another format version (a rolling upgrade) are never read as this version's nor removed as damage; listing and removeAll cover them")
    func otherVersions() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let prefix = store.configuration.keyPrefix
        let entry = E.entry("/v")
        try store.write(entry)
        let own = store.layout.entryKey(entry.key)
        guard case .bulkString(let metadata?) = try server.command("HGET", own, "m") else {
            throw RedisServer.Failure(description: "no metadata")
        }
        // An older host's entry for the same key (another EntryFileFormat version), and a newer
        // host's with metadata of a version this one does not know.
        let older = Array((prefix + "e1-1:").utf8) + own.suffix(64)
        let newer = Array((prefix + "e9-9:").utf8) + own.suffix(64)
        var newerMetadata = metadata
        newerMetadata[4] = 9
        _ = try server.command("HSET", older, "m", metadata, "d", "an older encoding")
        _ = try server.command("HSET", newer, "m", newerMetadata, "d", "a newer encoding")
        try store.removeEntry(for: entry.key)
        #expect(try store.entry(for: entry.key) == nil, "another version's entry is not this version's")
        #expect(try store.entryInfos().map(\.key) == [entry.key], "the older entry is listed by its metadata")
        #expect(try server.command("EXISTS", newer) == .integer(1), "newer metadata is not removed as damage")
        try store.removeAll()
        #expect(try server.command("EXISTS", older) == .integer(0) && server.command("EXISTS", newer) == .integer(0))
    }

    @Test("listing reads only the metadata field: no body crosses the wire; foreign values are skipped and removed")
    func listingWithoutBodies() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let body = String(repeating: "b", count: 100_000)
        let entries = (0..<20).map { E.entry("/big/\($0)", body: body, storedAt: E.base.addingTimeInterval(Double($0))) }
        for entry in entries { try store.write(entry) }
        _ = try server.command("SET", store.configuration.keyPrefix + "e:not-an-entry", "x")
        func sentBytes() throws -> Int {
            guard case .bulkString(let info?) = try server.command("INFO", "stats") else { return -1 }
            let line = String(decoding: info, as: UTF8.self).split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_net_output_bytes:") }
            return line.flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? -1
        }
        let before = try sentBytes()
        let infos = try store.entryInfos()
        let sent = try sentBytes() - before
        #expect(infos.sorted { $0.storedAt < $1.storedAt } == entries.map(StoredEntryInfo.init))
        #expect(sent > 0 && sent < 100_000, "listing 20 entries of 100 KB sent \(sent) bytes")
        #expect(try server.command("EXISTS", store.configuration.keyPrefix + "e:not-an-entry") == .integer(0))
        #expect(store.entryCount == 20)
        #expect(store.totalBytes == entries.reduce(0) { $0 + $1.byteCount })
    }

    @Test("removeAll and removeEntries walk 5,000 keys with SCAN, reporting monotonic progress; other prefixes are untouched")
    func scanRemoval() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let neighbour = try server.makeStore()
        try neighbour.write(E.entry("/neighbour"))
        _ = try store.partitionSecret()
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in stride(from: worker, to: 5000, by: 4) {
                _ = try? store.write(E.entry("/n/\(i)", storedAt: E.base.addingTimeInterval(Double(i))))
            }
        }
        #expect(store.entryCount == 5000)

        var reports: [RemovalProgress] = []
        try store.removeEntries(storedBefore: E.base.addingTimeInterval(2000)) { reports.append($0) }
        #expect(reports.first == RemovalProgress(removed: 0, total: 2000))
        #expect(reports.last == RemovalProgress(removed: 2000, total: 2000))
        #expect(reports.count >= 3 && zip(reports, reports.dropFirst()).allSatisfy { $0.removed <= $1.removed })
        #expect(store.entryCount == 3000)
        #expect(try store.entry(for: E.entry("/n/1999").key) == nil && store.entry(for: E.entry("/n/2000").key) != nil)

        reports = []
        try store.removeAll { reports.append($0) }
        #expect(reports.first == RemovalProgress(removed: 0, total: 3000))
        #expect(reports.last == RemovalProgress(removed: 3000, total: 3000))
        #expect(reports.count >= 3 && zip(reports, reports.dropFirst()).allSatisfy { $0.removed <= $1.removed && $0.total == $1.total })
        #expect(store.entryCount == 0)
        #expect(try neighbour.entry(for: E.entry("/neighbour").key) != nil, "another prefix's entry survived")
        #expect(try server.command("EXISTS", store.layout.secretKey) == .integer(1), "the secret is not an entry")
    }

    @Test("removeEntries keeps an entry replaced after it was listed")
    func removalComparesMetadata() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        try store.write(E.entry("/a"))
        try store.write(E.entry("/b"))
        let replaced = E.entry("/a", body: "new", storedAt: E.base.addingTimeInterval(100))
        var replacedOnce = false
        try store.removeEntries(where: { info in
            // The predicate runs between the listing and the removal: replace /a meanwhile.
            if !replacedOnce { replacedOnce = true; _ = try? store.write(replaced) }
            return true
        }, progress: { _ in })
        #expect(try store.entry(for: replaced.key) == replaced)
        #expect(try store.entry(for: E.entry("/b").key) == nil)
    }

    @Test("two stores on one prefix (two hosts) share entries, the secret and claims; another prefix shares nothing")
    func twoHosts() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = "shared-\(UUID().uuidString):"
        let hostA = try server.makeStore(prefix: prefix), hostB = try server.makeStore(prefix: prefix)
        let stranger = try server.makeStore()
        let entry = E.entry("/shared", body: "from A")
        try hostA.write(entry)
        #expect(try hostB.entry(for: entry.key) == entry)
        #expect(try stranger.entry(for: entry.key) == nil)
        #expect(try hostA.partitionSecret() == hostB.partitionSecret())
        #expect(try hostA.partitionSecret() != stranger.partitionSecret())

        let key = entry.key
        #expect(hostA.claimRefresh(of: key, lease: 30))
        #expect(!hostB.claimRefresh(of: key, lease: 30), "B is refused while A holds the claim")
        #expect(stranger.claimRefresh(of: key, lease: 30), "another prefix has claims of its own")
        hostB.releaseRefresh(of: key) // B holds nothing: A's claim stays
        #expect(!hostB.claimRefresh(of: key, lease: 30))
        hostA.releaseRefresh(of: key)
        #expect(hostB.claimRefresh(of: key, lease: 30), "B gets it once A gives it back")

        // A's lease ran out and B took the key: A's late release must leave B's claim alone.
        #expect(hostA.claimRefresh(of: E.entry("/lease").key, lease: 30) == true)
        _ = try server.command("SET", hostA.layout.claimKey(E.entry("/lease").key), "B's token")
        hostA.releaseRefresh(of: E.entry("/lease").key)
        #expect(try server.command("GET", hostA.layout.claimKey(E.entry("/lease").key)) == .bulkString(Array("B's token".utf8)))

        try hostB.removeEntry(for: key)
        #expect(try hostA.entry(for: key) == nil)
    }

    @Test("a store uses the configured database and nothing else")
    func database() throws {
        let server = try RedisServer()
        defer { server.stop() }
        var configuration = server.configuration()
        configuration.database = 3
        let store = try RedisResponseStore(configuration: configuration)
        try store.write(E.entry("/db"))
        _ = try store.partitionSecret()
        #expect(try server.command("DBSIZE", database: 3) == .integer(2))
        #expect(try server.command("DBSIZE") == .integer(0))
        let url = try RedisResponseStore(url: "redis://127.0.0.1:\(server.port)/3", keyPrefix: configuration.keyPrefix)
        #expect(try url.entry(for: E.entry("/db").key) != nil)
    }

    @Test("the largest entry is maxEntrySize (8 MiB by default): one that size is stored and read back whole")
    func largeEntries() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        #expect(store.maxEntrySize == 8 << 20)
        let small = E.entry("/huge", body: "x")
        let overhead = small.byteCount - 1
        let fits = E.entry("/huge", body: String(repeating: "y", count: (8 << 20) - overhead))
        #expect(fits.byteCount == 8 << 20)
        #expect(try store.write(fits).stored)
        #expect(try store.entry(for: fits.key) == fits)
        #expect(try store.write(E.entry("/huge", body: String(repeating: "y", count: (8 << 20) - overhead + 1))).stored == false)
        #expect(try store.entry(for: fits.key) == nil)
    }
}
