import Foundation
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// Keys a handler heard of.
final class KeyLog: Sendable {
    private let log = Mutex<[CacheKey]>([])
    func add(_ keys: [CacheKey]) { log.withLock { $0 += keys } }
    var keys: [CacheKey] { log.withLock { $0 } }
}

@Suite("Tiered store")
struct TieredResponseStoreTests {
    typealias E = StoreConformance

    /// Starts a read of `key` through `tiered` and waits until it is held inside the back
    /// store, after reading; the read ends once the gate opens.
    private func startHeldRead(_ tiered: TieredResponseStore, _ gate: ReadGate, _ key: CacheKey) async -> DispatchSemaphore {
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? tiered.entry(for: key)
            finished.signal()
        }
        await gate.readStarted()
        return finished
    }

    @Test("a removal wins over a read in flight: the read does not bring the entry back into memory")
    func removalWinsOverRead() async throws {
        let gate = ReadGate()
        let back = gate.store()
        let tiered = TieredResponseStore(back: back)
        let entry = E.entry("/r")
        try back.inner.write(entry) // in the back store only, so a read goes there
        let finished = await startHeldRead(tiered, gate, entry.key)
        try tiered.removeEntry(for: entry.key)
        gate.open()
        finished.wait()
        #expect(tiered.entryCount == 0)
        #expect(try tiered.entry(for: entry.key) == nil, "a removed entry was served from memory")
    }

    @Test("a newer write wins over a read in flight")
    func writeWinsOverRead() async throws {
        let gate = ReadGate()
        let back = gate.store()
        let tiered = TieredResponseStore(back: back)
        let old = E.entry("/w", body: "old")
        try back.inner.write(old)
        let finished = await startHeldRead(tiered, gate, old.key)
        let new = E.entry("/w", body: "new")
        try tiered.write(new)
        gate.open()
        finished.wait()
        #expect(try tiered.entry(for: old.key)?.body == Data("new".utf8), "an older read replaced a newer write in memory")
    }

    @Test("entries a disk store evicts in the background leave memory too, and the tiered store's handler hears of them")
    func backgroundEvictionsLeaveMemory() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskResponseStore(directory: directory.url, countLimit: 10, trimRatio: 0.5)
        defer { disk.close() }
        let tiered = TieredResponseStore(back: disk)
        let heard = KeyLog()
        tiered.evictionHandler = { keys in heard.add(keys) }
        var reported: [CacheKey] = []
        for i in 0..<11 { reported += try tiered.write(E.entry("/\(i)")).evicted }
        #expect(disk.waitForMaintenance())
        let evicted = reported + heard.keys
        #expect(evicted.count == 6, "down to half of 10")
        for key in evicted {
            #expect(tiered.memory.entry(for: key) == nil, "\(key) stayed in memory after the disk evicted it")
            #expect(try tiered.entry(for: key) == nil)
        }
        #expect(tiered.entryCount == 5)
    }

    @Test("a hit in memory counts as a use in the disk store, so the disk keeps what memory serves")
    func memoryHitsAreUses() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskResponseStore(directory: directory.url, countLimit: 4, trimRatio: 0.5)
        defer { disk.close() }
        let tiered = TieredResponseStore(back: disk)
        for i in 0..<4 { try tiered.write(E.entry("/\(i)")) }
        _ = try tiered.entry(for: E.entry("/0").key) // from memory: the oldest becomes the newest
        try tiered.write(E.entry("/4"))
        #expect(disk.waitForMaintenance())
        #expect(try disk.entry(for: E.entry("/0").key) != nil, "evicted although memory served it last")
        #expect(try disk.entry(for: E.entry("/1").key) == nil)
    }
}
