import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

@Suite("Disk store reads in place: only what the page cache holds, never a file the kernel must look for",
       .enabled(if: inPlaceReadsWork, "the temporary directory is not on ext4, XFS or Btrfs"))
struct DiskInPlaceReadTests {
    static func entry(_ path: String, body: String = "body", storedAt: Date = Date()) -> CacheEntry {
        let url = URL(string: "http://example.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: ["Cache-Control": "max-age=60"],
                          body: Data(body.utf8), storedAt: storedAt)
    }

    @Test("an entry just written is found in place, equal to what entry(for:) reads, and counted as a use")
    func foundInPlace() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let a = Self.entry("/a"), b = Self.entry("/b")
        try store.write(a)
        try store.write(b)
        #expect(store.immediateEntry(for: a.key) == .found(try #require(try store.entry(for: a.key))))
        #expect(store.immediateEntry(for: a.key) == .found(a))
        // /a was used after /b was written: /b is the least recently used.
        #expect(store.state.withLock { $0.index.leastRecentFirst().map(\.name) } == [EntryName(b.key), EntryName(a.key)])
    }

    @Test("another store on the same directory (another process) replaces or removes an entry: the next in-place read sees it at once")
    func otherWritersSeenAtOnce() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let other = try DiskResponseStore(directory: directory.url)
        defer { store.close(); other.close() }
        let old = Self.entry("/x", body: "old")
        try store.write(old)
        #expect(store.immediateEntry(for: old.key) == .found(old))
        let new = Self.entry("/x", body: "new", storedAt: Date().addingTimeInterval(1))
        try other.write(new)
        #expect(store.immediateEntry(for: old.key) == .found(new), "no descriptor or copy of the old file is kept")
        try other.removeEntry(for: old.key)
        #expect(store.immediateEntry(for: old.key) != .found(new))
        #expect(store.openFiles.file(for: EntryName(old.key)) == nil, "the removed file's descriptor let go at once")
        #expect(try store.entry(for: old.key) == nil)
        #expect(store.immediateEntry(for: old.key) == .absent, "the kernel now knows the name is not there")
    }

    @Test("an entry whose bytes are not in the page cache is not read in place; entry(for:) reads it, and then it is")
    func evictedNeedsIO() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let a = Self.entry("/cold", body: String(repeating: "c", count: 64 * 1024))
        try store.write(a)
        try #require(evictFromPageCache(directory, a.key))
        #expect(store.immediateEntry(for: a.key) == .needsIO)
        #expect(try store.entry(for: a.key) == a)
        #expect(store.immediateEntry(for: a.key) == .found(a))
    }

    @Test("a damaged file, a link in an entry's place and a file over the in-place limit are left to entry(for:), which reports and removes")
    func anythingOddNeedsIO() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let damaged = Self.entry("/damaged")
        try store.write(damaged)
        #expect(store.immediateEntry(for: damaged.key) == .found(damaged), "intact, it is read in place")
        try DiskResponseStoreTests.corrupt(store, damaged.key)
        #expect(store.immediateEntry(for: damaged.key) == .needsIO)
        #expect(directory.entryFiles().count == 1, "nothing is removed in place")
        #expect(throws: HTTPCachingError.self) { try store.entry(for: damaged.key) }
        #expect(directory.entryFiles().isEmpty, "the read on the I/O queue removed it")

        let linked = Self.entry("/linked"), target = Self.entry("/target")
        try store.write(target)
        #expect(store.immediateEntry(for: target.key) == .found(target))
        let name = DiskResponseStore.fileName(for: linked.key) + ".entry"
        #expect(symlink(DiskResponseStore.fileName(for: target.key) + ".entry", directory.path + "/" + name) == 0)
        #expect(store.immediateEntry(for: linked.key) == .needsIO, "never through a link")

        let large = Self.entry("/large", body: String(repeating: "l", count: DiskResponseStore.inPlaceReadLimit))
        try store.write(large)
        #expect(store.immediateEntry(for: large.key) == .needsIO)
        #expect(try store.entry(for: large.key) == large)
    }

    @Test("a hot entry's file is kept open and read again as it is; replaced by another process or unused across a sweep, it is let go; close() closes every descriptor")
    func keptFiles() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let other = try DiskResponseStore(directory: directory.url)
        let a = Self.entry("/a"), b = Self.entry("/b")
        try store.write(a)
        try store.write(b)
        #expect(store.immediateEntry(for: a.key) == .found(a))
        let kept = try #require(store.openFiles.file(for: EntryName(a.key)))
        #expect(store.immediateEntry(for: a.key) == .found(a))
        #expect(store.openFiles.file(for: EntryName(a.key)) === kept, "the file kept open was read again")

        let newer = Self.entry("/a", body: "newer", storedAt: Date().addingTimeInterval(1))
        try other.write(newer)
        #expect(!kept.isCurrent, "installed over in another process: no link left")
        #expect(store.immediateEntry(for: a.key) == .found(newer))
        #expect(store.openFiles.file(for: EntryName(a.key)) !== kept)

        #expect(store.immediateEntry(for: b.key) == .found(b))
        #expect(store.openFiles.count == 2)
        store.openFiles.sweep()
        #expect(store.immediateEntry(for: b.key) == .found(b))
        store.openFiles.sweep()
        #expect(store.openFiles.count == 1, "/a, unused since the last sweep, was let go")
        #expect(store.openFiles.file(for: EntryName(b.key)) != nil)
        other.close()
        store.close()
        #expect(store.openFiles.count == 0 && store.openFiles.closes.count == 0, "close() closes everything")
        #expect(store.immediateEntry(for: a.key) == .absent, "a closed store finds nothing")
    }

    @Test("descriptors let go are closed on the closing queue: a full batch at once")
    func deferredCloses() throws {
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[1]) }
        let closes = DeferredCloses()
        for _ in 0..<DeferredCloses.batch { closes.add(dup(pair[0])) }
        close(pair[0])
        closes.queue.sync {} // after the batch's closing, queued when it filled
        #expect(closes.count == 0)
        #expect(send(pair[1], [1], 1, Int32(MSG_NOSIGNAL)) == -1, "every duplicate closed: the peer is gone")
    }

    @Test("a store on tmpfs (not a disk file system the store knows opens without waiting) never reads in place: every lookup goes to the I/O queue",
          .enabled(if: FileManager.default.fileExists(atPath: "/dev/shm")))
    func tmpfsNeedsIO() throws {
        let directory = URL(fileURLWithPath: "/dev/shm/http-caching-tests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try DiskResponseStore(directory: directory)
        defer { store.close() }
        let a = Self.entry("/a")
        try store.write(a)
        let readsInPlace = store.inPlaceReads.load(ordering: .relaxed)
        #expect(!readsInPlace)
        #expect(store.immediateEntry(for: a.key) == .needsIO)
        #expect(try store.entry(for: a.key) == a)
    }

    @Test("a store with a transform never reads in place: the transform's decoding is the store user's code, kept off Foundation's queue",
          .enabled(if: DeflateTransform.isAvailable))
    func transformNeedsIO() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url, transform: DeflateTransform())
        defer { store.close() }
        let a = Self.entry("/a")
        try store.write(a)
        #expect(try store.entry(for: a.key) == a)
        #expect(store.immediateEntry(for: a.key) == .needsIO)
    }

    @Test("a tiered store reads its disk tier in place and keeps what it found in memory")
    func tieredFillsMemory() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskResponseStore(directory: directory.url)
        defer { disk.close() }
        let a = Self.entry("/a")
        try disk.write(a)
        let tiered = TieredResponseStore(back: disk)
        #expect(tiered.memory.immediateEntry(for: a.key) == .absent)
        #expect(tiered.immediateEntry(for: a.key) == .found(a))
        #expect(tiered.memory.immediateEntry(for: a.key) == .found(a))
    }
}
