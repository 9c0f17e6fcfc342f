import Foundation
import Testing
@testable import HTTPCaching

/// The behaviour every `ResponseStore` must show. Run a store through it with
/// `StoreConformance.run(makeStore)`: each check gets a new, empty store.
enum StoreConformance {
    static let base = Date(timeIntervalSince1970: 1_700_000_000)

    static func entry(_ path: String, body: String = "body", storedAt: Date = base,
                      headers: [String: String] = ["Content-Type": "text/plain"],
                      windows: CacheWindows? = nil) -> CacheEntry {
        let url = URL(string: "http://example.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: headers,
                          body: Data(body.utf8), storedAt: storedAt, windows: windows)
    }

    static func run(_ makeStore: () throws -> any ResponseStore) throws {
        try readsBackWhatWasWritten(makeStore())
        try replacesAnEntry(makeStore())
        try removesOne(makeStore())
        try removesAll(makeStore())
        try removesStoredSince(makeStore())
        try countsSizeAndEntries(makeStore())
        try isSafeFromManyThreads(makeStore())
    }

    static func readsBackWhatWasWritten(_ store: any ResponseStore) throws {
        #expect(try store.entry(for: entry("/a").key) == nil)
        let written = entry("/a?page=1", body: "one", headers: ["ETag": "\"1\"", "X-Custom": "yes"],
                            windows: .test(fresh: 1, usable: 2))
        let result = try store.write(written)
        #expect(result.stored)
        #expect(result.evicted.isEmpty)
        let read = try #require(try store.entry(for: written.key))
        #expect(read == written, "every field survives: status, headers, body, URL, time, windows")
        #expect(try store.entry(for: entry("/a?page=2").key) == nil, "the query is part of the key")
        let empty = CacheEntry(key: CacheKey(url: URL(string: "http://example.test/empty")!),
                               url: URL(string: "http://example.test/empty")!, statusCode: 204,
                               headers: [:], body: Data(), storedAt: base)
        try store.write(empty)
        #expect(try store.entry(for: empty.key) == empty)
    }

    static func replacesAnEntry(_ store: any ResponseStore) throws {
        try store.write(entry("/a", body: "old"))
        try store.write(entry("/a", body: "new", storedAt: base.addingTimeInterval(5)))
        let read = try #require(try store.entry(for: entry("/a").key))
        #expect(String(decoding: read.body, as: UTF8.self) == "new")
        #expect(read.storedAt == base.addingTimeInterval(5))
        #expect(store.entryCount == 1)
        #expect(store.totalBytes == entry("/a", body: "new").byteCount)
    }

    static func removesOne(_ store: any ResponseStore) throws {
        try store.write(entry("/a"))
        try store.write(entry("/b"))
        try store.removeEntry(for: entry("/a").key)
        try store.removeEntry(for: entry("/missing").key)
        #expect(try store.entry(for: entry("/a").key) == nil)
        #expect(try store.entry(for: entry("/b").key) != nil)
        #expect(store.entryCount == 1)
    }

    static func removesAll(_ store: any ResponseStore) throws {
        for i in 0..<20 { try store.write(entry("/\(i)")) }
        try store.removeAll()
        #expect(store.entryCount == 0)
        #expect(store.totalBytes == 0)
        #expect(try store.entry(for: entry("/3").key) == nil)
    }

    static func removesStoredSince(_ store: any ResponseStore) throws {
        for i in 0..<10 { try store.write(entry("/\(i)", storedAt: base.addingTimeInterval(TimeInterval(i)))) }
        try store.removeEntries(storedSince: base.addingTimeInterval(6))
        #expect(store.entryCount == 6)
        #expect(try store.entry(for: entry("/5").key) != nil)
        #expect(try store.entry(for: entry("/6").key) == nil, "stored exactly at the date: removed")
        #expect(try store.entry(for: entry("/9").key) == nil)
    }

    static func countsSizeAndEntries(_ store: any ResponseStore) throws {
        let a = entry("/a", body: String(repeating: "a", count: 100))
        let b = entry("/b", body: String(repeating: "b", count: 300))
        try store.write(a)
        try store.write(b)
        #expect(store.entryCount == 2)
        #expect(store.totalBytes == a.byteCount + b.byteCount)
        try store.removeEntry(for: a.key)
        #expect(store.totalBytes == b.byteCount)
    }

    static func isSafeFromManyThreads(_ store: any ResponseStore) throws {
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<200 {
                let item = entry("/w\(worker)/\(i % 20)", body: "\(worker)-\(i)")
                _ = try? store.write(item)
                if let read = try? store.entry(for: item.key) {
                    #expect(read.key == item.key)
                }
                if i % 7 == 0 { try? store.removeEntry(for: item.key) }
            }
        }
        #expect(store.entryCount <= 160)
        for worker in 0..<8 {
            for i in 180..<200 where i % 7 != 0 {
                let read = try store.entry(for: entry("/w\(worker)/\(i % 20)").key)
                #expect(read.map { String(decoding: $0.body, as: UTF8.self) } == "\(worker)-\(i)")
            }
        }
    }
}

@Suite("Memory store")
struct MemoryResponseStoreTests {
    @Test("passes the store conformance suite")
    func conformance() throws {
        try StoreConformance.run { MemoryResponseStore() }
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
        let store = try MemoryResponseStore(byteLimit: one * 3, countLimit: 100)
        for i in 0..<3 { store.write(StoreConformance.entry("/\(i)", body: String(repeating: "x", count: 1000))) }
        let result = store.write(StoreConformance.entry("/9", body: String(repeating: "y", count: 2000)))
        #expect(result.stored)
        #expect(result.evicted == [StoreConformance.entry("/0").key, StoreConformance.entry("/1").key])
        #expect(store.totalBytes <= one * 3)
    }

    @Test("an entry larger than the byte limit is not stored and replaces nothing")
    func tooLarge() throws {
        let store = try MemoryResponseStore(byteLimit: 500, countLimit: 10)
        store.write(StoreConformance.entry("/small"))
        let result = store.write(StoreConformance.entry("/big", body: String(repeating: "z", count: 1000)))
        #expect(!result.stored)
        #expect(store.entryCount == 1)
        #expect(store.entry(for: StoreConformance.entry("/big").key) == nil)
    }

    @Test("negative limits are an error")
    func badLimits() {
        #expect(throws: CacheConfigurationError.self) { try MemoryResponseStore(byteLimit: -1) }
        #expect(throws: CacheConfigurationError.self) { try MemoryResponseStore(countLimit: -1) }
    }

    @Test("a large store is dropped without recursing through its links")
    func largeStoreDeallocates() throws {
        let store = try MemoryResponseStore(byteLimit: 1 << 30, countLimit: 200_000)
        for i in 0..<100_000 { store.write(StoreConformance.entry("/\(i)", body: "")) }
        #expect(store.entryCount == 100_000)
        // removeAll drops 100,000 linked nodes; done on a thread with a small stack.
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { store.removeAll(); done.signal() }
        thread.stackSize = 256 * 1024
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(store.entryCount == 0)
    }
}
