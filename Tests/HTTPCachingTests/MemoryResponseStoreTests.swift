import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

@Suite("Memory store")
struct MemoryResponseStoreTests {
    @Test("passes the store conformance suite; nothing can damage it behind its back, and its claims are per process, so those two checks are skipped")
    func conformance() throws {
        let report = try StoreConformance(makeStore: { MemoryResponseStore() },
                                          makeStoreWithCountLimit: { try MemoryResponseStore(countLimit: $0) }).run()
        #expect(report.skippedChecks == ["treats damage as a miss", "claims refreshes exclusively"], "\(report)")
        #expect(report.passed.count == StoreConformance.checkNames.count - 2)
    }

    @Test("evicts the least recently used entry past the count limit; a read counts as a use")
    func countLimit() throws {
        let store = try MemoryResponseStore(byteLimit: 1 << 20, countLimit: 3)
        for path in ["/a", "/b", "/c"] { store.write(StoreConformance.entry(path)) }
        _ = store.entry(for: StoreConformance.entry("/a").key)
        let result = store.write(StoreConformance.entry("/d"))
        #expect(result.evicted == [StoreConformance.entry("/b").key])
        #expect(store.entryCount == 3)
        #expect(store.entry(for: StoreConformance.entry("/a").key) != nil)
        #expect(store.entry(for: StoreConformance.entry("/b").key) == nil)
    }

    @Test("evicts least recently used entries until the bytes fit")
    func byteLimit() throws {
        let one = StoreConformance.entry("/0", body: String(repeating: "x", count: 1000)).byteCount
        let store = try MemoryResponseStore(byteLimit: one * 3, countLimit: 100, maxEntrySize: one * 3)
        for i in 0..<3 { store.write(StoreConformance.entry("/\(i)", body: String(repeating: "x", count: 1000))) }
        let result = store.write(StoreConformance.entry("/9", body: String(repeating: "y", count: 2000)))
        #expect(result.stored)
        #expect(result.evicted == [StoreConformance.entry("/0").key, StoreConformance.entry("/1").key])
        #expect(store.totalBytes <= one * 3)
    }

    @Test("an entry over maxEntrySize is not stored and evicts nothing; the older entry under its key is removed, not kept in its place")
    func oversizedEntry() throws {
        let store = try MemoryResponseStore(byteLimit: 10_000, countLimit: 10, maxEntrySize: 500)
        store.write(StoreConformance.entry("/small"))
        store.write(StoreConformance.entry("/big"))
        let result = store.write(StoreConformance.entry("/big", body: String(repeating: "z", count: 1000)))
        #expect(!result.stored && result.evicted.isEmpty)
        #expect(store.entry(for: StoreConformance.entry("/big").key) == nil, "the older, smaller entry under its key is removed")
        #expect(store.entry(for: StoreConformance.entry("/small").key) != nil, "no other entry is evicted")
        #expect(store.entryCount == 1)
    }

    @Test("maxEntrySize is at most the byte limit, and an eighth of it by default")
    func maxEntrySizeBounds() throws {
        #expect(try MemoryResponseStore(byteLimit: 500, maxEntrySize: 10_000).maxEntrySize == 500)
        #expect(try MemoryResponseStore(byteLimit: 8_000).maxEntrySize == 1_000)
        let store = try MemoryResponseStore(byteLimit: 500, countLimit: 10, maxEntrySize: 10_000)
        #expect(!store.write(StoreConformance.entry("/big", body: String(repeating: "z", count: 1000))).stored,
                "an entry larger than the byte limit is not stored")
        #expect(store.entryCount == 0)
    }

    @Test("negative limits are an error")
    func badLimits() {
        #expect(throws: HTTPCachingError.self) { try MemoryResponseStore(byteLimit: -1) }
        #expect(throws: HTTPCachingError.self) { try MemoryResponseStore(countLimit: -1) }
    }

    @Test("a large store is dropped without recursing through its links")
    func largeStoreDeallocates() throws {
        let store = try MemoryResponseStore(byteLimit: 1 << 30, countLimit: 200_000)
        for i in 0..<100_000 { store.write(StoreConformance.entry("/\(i)", body: "")) }
        #expect(store.entryCount == 100_000)
        // removeAll drops 100,000 linked nodes; done on a thread with a small stack.
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { store.removeAll(progress: { _ in }); done.signal() }
        thread.stackSize = 256 * 1024
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(store.entryCount == 0)
    }
}
