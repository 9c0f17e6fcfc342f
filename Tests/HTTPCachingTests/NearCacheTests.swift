import Foundation
import Synchronization
import Testing
@testable import HTTPCaching

/// A tiered store's memory kept coherent across processes: a child process (`store-stress-worker
/// near`) holds an entry in its memory tier, this process replaces or removes it in the shared
/// back store, and the child stops serving the old body.
@Suite("Near cache coherent across processes", .serialized)
struct NearCacheTests {
    /// An entry for a path of the worker's keys, with a text body.
    private func entry(_ path: String, _ body: String) -> CacheEntry {
        let url = URL(string: "http://stress.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data(body.utf8),
                          storedAt: Date())
    }

    /// Sends a line and returns the worker's answer.
    private func ask(_ worker: Worker, _ line: String) -> String {
        worker.send(line)
        return worker.nextLine() ?? "(no answer)"
    }

    /// The child caches `/x` in memory; this process replaces it, then removes it.
    private func replaceAndRemove(_ worker: Worker, write: (CacheEntry) throws -> Void, remove: (CacheKey) throws -> Void) throws {
        let first = entry("/x", "v1")
        try write(first)
        #expect(ask(worker, "serving") == "serving")
        #expect(ask(worker, "get /x") == "back v1")
        #expect(ask(worker, "get /x") == "near v1", "the second read is a near hit")
        try write(entry("/x", "v2"))
        #expect(eventually(timeout: 5) { ask(worker, "get /x") != "near v1" }, "the replaced entry stopped being served")
        #expect(eventually(timeout: 5) { ask(worker, "get /x") == "near v2" }, "the new entry fills memory again")
        try remove(first.key)
        #expect(eventually(timeout: 5) { ask(worker, "get /x") == "none" }, "the removed entry stopped being served")
        worker.closeInput()
        #expect(worker.waitForExit())
    }

    @Test("Redis: another process replaces, then removes, an entry held in the near cache; it stops being served", .redisServer)
    func redisReplaceAndRemove() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let writer = try server.makeStore(prefix: RedisConfiguration.defaultKeyPrefix)
        let worker = try Worker(["near", "redis://127.0.0.1:\(server.port)", "0.05"])
        try replaceAndRemove(worker, write: { try writer.write($0) }, remove: { try writer.removeEntry(for: $0) })
    }

    @Test("disk: another process replaces, then removes, an entry held in the tiered store's memory; it stops being served")
    func diskReplaceAndRemove() throws {
        let directory = TemporaryDirectory()
        let writer = try DiskResponseStore(directory: directory.url)
        defer { writer.close() }
        let worker = try Worker(["near", directory.path, "1"])
        try replaceAndRemove(worker, write: { try writer.write($0) }, remove: { try writer.removeEntry(for: $0) })
    }

    @Test("Redis: killing the invalidation connection empties the near cache and bypasses it until tracking is back", .redisServer)
    func redisConnectionLost() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let writer = try server.makeStore(prefix: RedisConfiguration.defaultKeyPrefix)
        try writer.write(entry("/x", "v1"))
        // A retry delay of 3 s: long enough to look at the near cache while it is bypassed.
        let worker = try Worker(["near", "redis://127.0.0.1:\(server.port)", "3"])
        #expect(ask(worker, "serving") == "serving")
        _ = ask(worker, "get /x")
        #expect(ask(worker, "get /x") == "near v1")
        #expect(try server.command("CLIENT", "KILL", "TYPE", "pubsub") == .integer(1))
        #expect(ask(worker, "lost") == "lost")
        #expect(ask(worker, "get /x") == "back v1", "bypassed: read from Redis")
        #expect(ask(worker, "get /x") == "back v1", "not put into memory while nothing tells of changes")
        try writer.write(entry("/x", "v2")) // unseen by the worker's tracking, which is down
        #expect(ask(worker, "serving") == "serving", "tracking is back after the retry delay")
        #expect(ask(worker, "get /x") == "back v2", "memory was emptied: nothing older is served")
        #expect(ask(worker, "get /x") == "near v2")
        try writer.write(entry("/x", "v3"))
        #expect(eventually(timeout: 5) { ask(worker, "get /x") != "near v2" }, "invalidations flow again")
        worker.closeInput()
        #expect(worker.waitForExit())
    }

    @Test("Redis: an invalidation connection gone silent (the server stopped with SIGSTOP) is found by its PING; memory serves again once it answers", .redisServer)
    func redisSilentConnection() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let worker = try Worker(["near", "redis://127.0.0.1:\(server.port)", "0.05"])
        #expect(ask(worker, "serving") == "serving")
        server.pause()
        #expect(ask(worker, "lost") == "lost", "a second of silence, then a PING unanswered within the command timeout")
        server.resume()
        #expect(ask(worker, "serving") == "serving")
        worker.closeInput()
        #expect(worker.waitForExit())
    }

    @Test("reads racing 300 replacements never leave an older entry in the near cache once the writes stop", .redisServer)
    func racingReadsLeaveNoStaleFill() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = "near-\(UUID().uuidString):"
        let tiered = TieredResponseStore(back: try server.makeStore(prefix: prefix))
        #expect(eventually(timeout: 10) { tiered.servesFromMemory })
        try race(tiered, writer: try server.makeStore(prefix: prefix))
    }

    @Test("disk: reads racing 300 replacements by another store on the directory never leave an older entry in memory")
    func diskRacingReadsLeaveNoStaleFill() throws {
        let directory = TemporaryDirectory()
        let writer = try DiskResponseStore(directory: directory.url)
        let back = try DiskResponseStore(directory: directory.url)
        defer { writer.close(); back.close() }
        try race(TieredResponseStore(back: back), writer: writer)
    }

    @Test("Redis: an entry read just before its invalidation arrives is not put into memory after it", .redisServer)
    func redisReadBeforeInvalidation() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = "near-\(UUID().uuidString):"
        let tiered = TieredResponseStore(back: try server.makeStore(prefix: prefix))
        #expect(eventually(timeout: 10) { tiered.servesFromMemory })
        try readBeforeInvalidation(tiered, writer: try server.makeStore(prefix: prefix))
    }

    @Test("disk: an entry read just before the journal tells of its replacement is not put into memory after it")
    func diskReadBeforeInvalidation() throws {
        let directory = TemporaryDirectory()
        let writer = try DiskResponseStore(directory: directory.url)
        let back = try DiskResponseStore(directory: directory.url)
        defer { writer.close(); back.close() }
        try readBeforeInvalidation(TieredResponseStore(back: back), writer: writer)
    }

    /// Holds a read of `/held` after the back store answered with v1, has `writer` replace it
    /// and waits until the change is told, then lets the read go on: memory must not keep v1.
    private func readBeforeInvalidation(_ tiered: TieredResponseStore, writer: any ResponseStore) throws {
        let key = entry("/held", "v1").key
        var told = tiered.coherence.ticket
        try writer.write(entry("/held", "v1"))
        _ = eventually(timeout: 1) { tiered.coherence.ticket != told } // the write's own news, if any
        let reached = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        tiered.afterBackRead.withLock { $0 = { reached.signal(); gate.wait() } }
        DispatchQueue.global().async {
            _ = try? tiered.entry(for: key)
            done.signal()
        }
        #expect(reached.wait(timeout: .now() + 10) == .success)
        tiered.afterBackRead.withLock { $0 = nil }
        told = tiered.coherence.ticket
        try writer.write(entry("/held", "v2"))
        #expect(eventually(timeout: 5) { tiered.coherence.ticket != told }, "the replacement was told")
        gate.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(tiered.memory.entry(for: key)?.body != Data("v1".utf8), "v1, read before the replacement was told, was put into memory")
        #expect(try tiered.entry(for: key)?.body == Data("v2".utf8))
    }

    /// Three threads read through `tiered` while `writer` replaces the entry 300 times; then
    /// the last version is served, and keeps being served.
    private func race(_ tiered: TieredResponseStore, writer: any ResponseStore) throws {
        let key = entry("/race", "0").key
        try writer.write(entry("/race", "0"))
        let done = Atomic<Bool>(false)
        let readers = DispatchGroup()
        for _ in 0..<3 {
            DispatchQueue.global().async(group: readers) {
                while !done.load(ordering: .relaxed) { _ = try? tiered.entry(for: key) }
            }
        }
        for version in 1...300 { try writer.write(entry("/race", "\(version)")) }
        done.store(true, ordering: .relaxed)
        readers.wait()
        let last = Data("300".utf8)
        #expect(eventually(timeout: 5) { (try? tiered.entry(for: key))?.body == last })
        for _ in 0..<50 { #expect(try tiered.entry(for: key)?.body == last, "an older entry came back") }
    }

    @Test("in one process: a tiered store in front of Redis drops what another store on the prefix replaces", .redisServer)
    func redisInProcess() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = "near-\(UUID().uuidString):"
        let writer = try server.makeStore(prefix: prefix)
        let tiered = TieredResponseStore(back: try server.makeStore(prefix: prefix))
        #expect(eventually(timeout: 10) { tiered.servesFromMemory })
        let old = entry("/y", "old")
        try writer.write(old)
        #expect(try tiered.entry(for: old.key)?.body == Data("old".utf8))
        // The writer's own invalidation may drop the first fill: read until memory holds it.
        #expect(eventually(timeout: 5) { _ = try? tiered.entry(for: old.key); return tiered.immediateEntry(for: old.key) != .needsIO })
        try writer.write(entry("/y", "new"))
        #expect(eventually(timeout: 5) { tiered.immediateEntry(for: old.key) == .needsIO })
        #expect(try tiered.entry(for: old.key)?.body == Data("new".utf8))
        #expect(try server.command("FLUSHALL").isOK)
        #expect(eventually(timeout: 5) { tiered.memory.entryCount == 0 }, "a flush empties memory")
    }
}

@Suite("Near cache limits")
struct NearCacheLimitTests {
    @Test("in front of a Redis Cluster that cannot be reached, memory does not serve: every read goes to Redis")
    func unreachableClusterNeverServes() throws {
        var configuration = RedisConfiguration(host: "127.0.0.1", port: 1, connectTimeout: 0.1, commandTimeout: 0.1, retryDelay: 0)
        configuration.isCluster = true
        let tiered = TieredResponseStore(back: try RedisResponseStore(configuration: configuration))
        let url = URL(string: "http://near.test/c")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data("c".utf8), storedAt: Date())
        tiered.memory.write(entry)
        #expect(!tiered.servesFromMemory)
        #expect(tiered.immediateEntry(for: entry.key) == .needsIO)
        #expect(throws: HTTPCachingError.self) { try tiered.entry(for: entry.key) }
    }

    @Test("in front of sentinels that cannot be reached, memory does not serve: every read goes to Redis")
    func unreachableSentinelsNeverServe() throws {
        var configuration = RedisConfiguration(host: "127.0.0.1", port: 1, connectTimeout: 0.1, commandTimeout: 0.1, retryDelay: 0)
        configuration.sentinelMasterName = "mymaster"
        let tiered = TieredResponseStore(back: try RedisResponseStore(configuration: configuration))
        let url = URL(string: "http://near.test/s")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data("s".utf8), storedAt: Date())
        tiered.memory.write(entry)
        #expect(!tiered.servesFromMemory)
        #expect(tiered.immediateEntry(for: entry.key) == .needsIO)
        #expect(throws: HTTPCachingError.self) { try tiered.entry(for: entry.key) }
    }

    @Test("in front of a Redis that is down, memory does not serve and reads fail as the store's own")
    func redisDownNeverServes() throws {
        let configuration = RedisConfiguration(host: "127.0.0.1", port: 1, connectTimeout: 0.1, commandTimeout: 0.1, retryDelay: 0.05)
        let tiered = TieredResponseStore(back: try RedisResponseStore(configuration: configuration))
        let url = URL(string: "http://near.test/d")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data("d".utf8), storedAt: Date())
        #expect(throws: HTTPCachingError.self) { try tiered.write(entry) }
        #expect(tiered.memory.entry(for: entry.key) == nil)
        #expect(!tiered.servesFromMemory)
        #expect(throws: HTTPCachingError.self) { try tiered.entry(for: entry.key) }
    }
}
