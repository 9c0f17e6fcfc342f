import Foundation
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// A store whose reads stop, after reading, until the test lets them go.
final class GatedStore: ResponseStore, @unchecked Sendable {
    let inner: MemoryResponseStore
    let gateReads = Mutex(false)
    let readDone = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    init(_ inner: MemoryResponseStore) { self.inner = inner }

    func entry(for key: CacheKey) throws -> CacheEntry? {
        let entry = inner.entry(for: key)
        if gateReads.withLock({ $0 }) {
            readDone.signal()
            release.wait()
        }
        return entry
    }
    func write(_ entry: CacheEntry) throws -> StoreWriteResult { inner.write(entry) }
    func removeEntry(for key: CacheKey) throws { inner.removeEntry(for: key) }
    func removeAll(progress: (RemovalProgress) -> Void) throws { inner.removeAll(progress: progress) }
    func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        inner.removeEntries(where: predicate, progress: progress)
    }
    func entryInfos() throws -> [StoredEntryInfo] { inner.entryInfos() }
    var totalBytes: Int { inner.totalBytes }
    var entryCount: Int { inner.entryCount }
}

/// Keys a handler heard of.
final class KeyLog: Sendable {
    private let log = Mutex<[CacheKey]>([])
    func add(_ keys: [CacheKey]) { log.withLock { $0 += keys } }
    var keys: [CacheKey] { log.withLock { $0 } }
}

@Suite("Tiered store")
struct TieredResponseStoreTests {
    typealias E = StoreConformance

    /// Starts a read of `key` through `tiered` that stops inside the back store, after it has read.
    private func startGatedRead(_ tiered: TieredResponseStore, _ back: GatedStore, _ key: CacheKey) -> DispatchSemaphore {
        back.gateReads.withLock { $0 = true }
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? tiered.entry(for: key)
            finished.signal()
        }
        back.readDone.wait()
        back.gateReads.withLock { $0 = false }
        return finished
    }

    @Test("a removal wins over a read in flight: the read does not bring the entry back into memory")
    func removalWinsOverRead() throws {
        let back = GatedStore(MemoryResponseStore())
        let tiered = TieredResponseStore(back: back)
        let entry = E.entry("/r")
        back.inner.write(entry) // in the back store only, so a read goes there
        let finished = startGatedRead(tiered, back, entry.key)
        try tiered.removeEntry(for: entry.key)
        back.release.signal()
        finished.wait()
        #expect(tiered.entryCount == 0)
        #expect(try tiered.entry(for: entry.key) == nil, "a removed entry was served from memory")
    }

    @Test("a newer write wins over a read in flight")
    func writeWinsOverRead() throws {
        let back = GatedStore(MemoryResponseStore())
        let tiered = TieredResponseStore(back: back)
        let old = E.entry("/w", body: "old")
        back.inner.write(old)
        let finished = startGatedRead(tiered, back, old.key)
        let new = E.entry("/w", body: "new")
        try tiered.write(new)
        back.release.signal()
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
