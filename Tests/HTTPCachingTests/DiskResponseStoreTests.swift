import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
@testable import store_crash_writer

@Suite("Disk store")
struct DiskResponseStoreTests {
    typealias E = StoreConformance

    /// Flips a byte in the middle of a key's entry file (and drops a tiered store's copy in memory).
    static func corrupt(_ store: any ResponseStore, _ key: CacheKey) throws {
        (store as? TieredResponseStore)?.memory.removeEntry(for: key)
        let disk = try #require((store as? DiskResponseStore) ?? ((store as? TieredResponseStore)?.back as? DiskResponseStore))
        let path = disk.files.path + "/" + DiskResponseStore.fileName(for: key) + ".entry"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[bytes.count / 2] ^= 0x40
        try overwrite(path, with: bytes)
    }

    @Test("passes the store conformance suite")
    func conformance() throws {
        let directory = TemporaryDirectory()
        var count = 0
        var open: [DiskResponseStore] = []
        defer { open.forEach { $0.close() } }
        let make = { (countLimit: Int) throws -> any ResponseStore in
            count += 1
            let store = try DiskResponseStore(directory: directory.url.appendingPathComponent("\(count)"), countLimit: countLimit)
            open.append(store)
            return store
        }
        let report = try StoreConformance(makeStore: { try make(100_000) }, makeStoreWithCountLimit: make,
                                          corrupt: Self.corrupt, claimsAreExclusive: true, skipsAreFailures: true).run()
        #expect(report.passed == StoreConformance.checkNames, "every check ran: \(report)")
    }

    @Test("a tiered store passes the conformance suite too")
    func tieredConformance() throws {
        let directory = TemporaryDirectory()
        var count = 0
        var open: [DiskResponseStore] = []
        defer { open.forEach { $0.close() } }
        let make = { (countLimit: Int) throws -> any ResponseStore in
            count += 1
            let store = try DiskResponseStore(directory: directory.url.appendingPathComponent("\(count)"), countLimit: countLimit)
            open.append(store)
            return TieredResponseStore(back: store)
        }
        let report = try StoreConformance(makeStore: { try make(100_000) }, makeStoreWithCountLimit: make,
                                          corrupt: Self.corrupt, claimsAreExclusive: true, skipsAreFailures: true).run()
        #expect(report.passed == StoreConformance.checkNames, "every check ran: \(report)")
    }

    @Test("entries, their ages, windows and the order of use survive a restart")
    func restart() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try DiskResponseStore(directory: directory.url, countLimit: 3, trimRatio: 1)
            try store.write(E.entry("/a", storedAt: E.base, windows: .test(fresh: 5, usable: 50)))
            try store.write(E.entry("/b", storedAt: E.base.addingTimeInterval(10)))
            try store.write(E.entry("/c", storedAt: E.base.addingTimeInterval(20)))
            _ = try store.entry(for: E.entry("/a").key) // /a is now the most recent use
            store.close()
        }
        let reopened = try DiskResponseStore(directory: directory.url, countLimit: 3, trimRatio: 1)
        let evicted = Evictions(reopened)
        #expect(reopened.entryCount == 3)
        let a = try #require(try reopened.entry(for: E.entry("/a").key))
        #expect(a.storedAt == E.base && a.windows == .test(fresh: 5, usable: 50))
        #expect(a.age(at: E.base.addingTimeInterval(100)) == 100)
        let result = try reopened.write(E.entry("/d"))
        #expect(reopened.waitForMaintenance())
        #expect(result.evicted + evicted.keys == [E.entry("/b").key], "the least recently used before the restart")
    }

    @Test("a process killed at random moments leaves every readable entry whole and correct")
    func crashSafety() async throws {
        let directory = TemporaryDirectory()
        let executable = builtExecutable(named: "store-crash-writer")
        var verified = 0
        for round in 0..<12 {
            let process = try ChildProcess(executable.path, [directory.path], output: .pipe, errors: .inherit)
            _ = process.output!.availableData // "ready": the store is open
            if round == 0 {
                // Another store opens the directory while the writer runs, and reads whole entries.
                let reader = try DiskResponseStore(directory: directory.url, byteLimit: 8 << 20, countLimit: 40)
                for item in 0..<60 {
                    let key = CacheKey(url: URL(string: "http://crash.test/item/\(item)")!)
                    guard let entry = try? reader.entry(for: key) else { continue }
                    let sequence = try #require(entry.headers["X-Seq"].flatMap(Int.init))
                    #expect(entry.body == CrashBody.body(for: sequence), "entry \(item), sequence \(sequence), read while written")
                }
                reader.close()
            }
            // Kill it at a random moment in its loop, and wait for it to end.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int.random(in: 5...120))) {
                process.send(SIGKILL)
            }
            await process.exit()
            #expect(process.terminatingSignal == SIGKILL)

            let store = try DiskResponseStore(directory: directory.url, byteLimit: 8 << 20, countLimit: 40)
            for item in 0..<60 {
                let key = CacheKey(url: URL(string: "http://crash.test/item/\(item)")!)
                guard let entry = try store.entry(for: key) else { continue }
                let sequence = try #require(entry.headers["X-Seq"].flatMap(Int.init))
                #expect(entry.body == CrashBody.body(for: sequence), "entry \(item), sequence \(sequence)")
                #expect(sequence % 60 == item)
                verified += 1
            }
            #expect(store.entryCount <= 40)
            store.close()
        }
        #expect(verified > 0)
        #expect(!((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).contains { $0.hasSuffix(".tmp") },
                "leftover temporary files are removed on open")
    }

    @Test("damaged files are a miss, removed and reported, never a crash", arguments: ["random", "truncated", "empty", "flipped"])
    func corruption(kind: String) throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let entry = E.entry("/victim", body: String(repeating: "payload ", count: 500))
        try store.write(entry)
        let file = directory.path + "/" + DiskResponseStore.fileName(for: entry.key) + ".entry"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        switch kind {
        case "random": bytes = Data((0..<bytes.count).map { _ in UInt8.random(in: 0...255) })
        case "truncated": bytes = bytes.prefix(bytes.count / 2)
        case "empty": bytes = Data()
        default: bytes[bytes.count / 2] ^= 0x40
        }
        try overwrite(file, with: bytes)
        #expect(throws: HTTPCachingError.self) { try store.entry(for: entry.key) }
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(store.entryCount == 0)
        #expect(try store.entry(for: entry.key) == nil)

        // Through a cache: a miss and a `corrupted` event.
        try store.write(entry)
        try overwrite(file, with: bytes)
        let cache = HTTPCache(store: store)
        let recorder = EventRecorder(cache)
        #expect(cache.manage.cachedEntry(for: URLRequest(url: entry.url)) == nil)
        #expect(recorder.kinds.contains { $0.name == "corrupted" })
    }

    @Test("damaged, foreign or older-format entry files found on open are removed; files the store does not name are left alone")
    func corruptionOnOpen() throws {
        let directory = TemporaryDirectory()
        try DiskResponseStore(directory: directory.url).close()
        let foreign = directory.path + "/" + String(repeating: "ab", count: 16) + ".entry"
        try overwrite(foreign, with: Data("not an entry".utf8))
        let older = directory.path + "/" + String(repeating: "cd", count: 32) + ".entry" // format 2 named files so
        try overwrite(older, with: Data("HTCE\u{2}".utf8))
        try overwrite(directory.path + "/notes.txt", with: Data("mine".utf8))
        let store = try DiskResponseStore(directory: directory.url)
        #expect(!FileManager.default.fileExists(atPath: foreign))
        #expect(!FileManager.default.fileExists(atPath: older))
        #expect(FileManager.default.fileExists(atPath: directory.path + "/notes.txt"))
        #expect(store.entryCount == 0)
    }

    @Test("an entry of an older format version is a quiet miss, and removed")
    func olderVersion() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let entry = E.entry("/old")
        try store.write(entry)
        let file = directory.path + "/" + DiskResponseStore.fileName(for: entry.key) + ".entry"
        try overwrite(file, with: Data("HTCE\u{2}\u{0}".utf8) + Data(count: 100)) // as format 2 began
        #expect(try store.entry(for: entry.key) == nil, "no corruptEntry thrown for an older version")
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(store.entryCount == 0)
    }

    @Test("an entry file holding another key is a miss, never the wrong response")
    func collision() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let a = E.entry("/a", body: "A")
        try store.write(a)
        let b = E.entry("/b")
        try FileManager.default.copyItem(atPath: directory.path + "/" + DiskResponseStore.fileName(for: a.key) + ".entry",
                                         toPath: directory.path + "/" + DiskResponseStore.fileName(for: b.key) + ".entry")
        #expect(try store.entry(for: b.key) == nil)
        #expect(try store.entry(for: a.key) == a)
        #expect(directory.entryFiles().count == 2, "a collision removes neither file")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/" + DiskResponseStore.fileName(for: a.key) + ".entry"))
        #expect(throws: EntryFileFormat.DecodeError.keyMismatch) { try EntryFileFormat.decode(bytes, expecting: b.key) }
    }

    @Test("no key names a path outside the directory")
    func fileNames() {
        for url in ["http://h/../../../etc/passwd", "http://h/%2e%2e/x", "http://h/a b/\u{0}"] {
            let name = DiskResponseStore.fileName(for: CacheKey(method: "GET", normalizedURL: url))
            #expect(name.count == 32 && name.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        }
    }

    @Test("the directory is 0700 and entry files 0600")
    func filePermissions() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url.appendingPathComponent("nested/deeper"))
        try store.write(E.entry("/p"))
        let path = directory.path + "/nested/deeper"
        #expect(permissions(path) == 0o700)
        #expect(permissions(path + "/" + DiskResponseStore.fileName(for: E.entry("/p").key) + ".entry") == 0o600)
        #expect(permissions(path + "/index.log") == 0o600)
    }

    @Test("past the count limit, least recently used entries are trimmed to the ratio")
    func countLimit() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url, countLimit: 10, trimRatio: 0.7)
        let evictions = Evictions(store)
        for i in 0..<10 { try store.write(E.entry("/\(i)")) }
        _ = try store.entry(for: E.entry("/0").key)
        let result = try store.write(E.entry("/10"))
        #expect(result.stored)
        #expect(store.waitForMaintenance())
        #expect(store.entryCount == 7)
        let evicted = result.evicted + evictions.keys
        #expect(evicted.count == 4)
        #expect(!evicted.contains(E.entry("/0").key), "recently read: kept")
        #expect(try store.entry(for: E.entry("/10").key) != nil)
        #expect(directory.entryFiles().count == 7, "evicted files are deleted")
    }

    @Test("past the byte limit, entries are trimmed to the ratio; an entry over the maximum size is not stored")
    func byteLimits() throws {
        let directory = TemporaryDirectory()
        let one = E.entry("/0", body: String(repeating: "x", count: 1000)).byteCount
        let store = try DiskResponseStore(directory: directory.url, byteLimit: one * 10, maxEntrySize: 5000, trimRatio: 0.5)
        for i in 0..<11 { try store.write(E.entry("/\(i)", body: String(repeating: "x", count: 1000))) }
        #expect(store.totalBytes <= one * 5)
        let big = E.entry("/big", body: String(repeating: "y", count: 6000))
        #expect(try store.write(big).stored == false)
        #expect(try store.entry(for: big.key) == nil)
    }

    @Test("two stores on one directory share entries, removals and totals")
    func shared() throws {
        let directory = TemporaryDirectory()
        let first = try DiskResponseStore(directory: directory.url)
        let second = try DiskResponseStore(directory: directory.url)
        defer { first.close(); second.close() }
        try first.write(E.entry("/a", body: "from the first"))
        #expect(try second.entry(for: E.entry("/a").key)?.body == Data("from the first".utf8))
        #expect(second.entryCount == 1, "the second learns the first's write from the journal")
        try second.write(E.entry("/b"))
        try second.removeEntry(for: E.entry("/a").key)
        #expect(try first.entry(for: E.entry("/a").key) == nil)
        #expect(first.entryCount == 1)
        #expect(first.totalBytes == E.entry("/b").byteCount)
        #expect(first.entryInfos().map(\.key) == [E.entry("/b").key])
        #expect(first.partitionSecret() == second.partitionSecret())
    }

    @Test("a per-session store keeps its entries in a folder of its own, removed when it closes")
    func perSession() throws {
        let directory = TemporaryDirectory()
        let permanent = try DiskResponseStore(directory: directory.url)
        try permanent.write(E.entry("/old"))
        let session = try DiskResponseStore(directory: directory.url, policy: .perSession)
        let other = try DiskResponseStore(directory: directory.url, policy: .perSession)
        #expect(session.entryCount == 0, "the shared entries are not the session's")
        #expect(try session.entry(for: E.entry("/old").key) == nil)
        try session.write(E.entry("/new"))
        #expect(session.entryCount == 1)
        #expect(try other.entry(for: E.entry("/new").key) == nil, "sessions do not share")
        #expect(try permanent.entry(for: E.entry("/new").key) == nil)
        #expect(permanent.entryCount == 1)
        session.close()
        other.close()
        let sessions = (try? FileManager.default.contentsOfDirectory(atPath: directory.path + "/sessions")) ?? []
        #expect(sessions.isEmpty, "removed on close: \(sessions)")
        #expect(try permanent.entry(for: E.entry("/old").key) != nil, "the shared entries stay")
        permanent.close()
    }

    @Test("a session folder left by a crashed store is removed by the next store to open the directory")
    func abandonedSession() throws {
        let directory = TemporaryDirectory()
        try DiskResponseStore(directory: directory.url).close()
        let abandoned = directory.path + "/sessions/s-0123456789abcdef"
        try FileManager.default.createDirectory(atPath: abandoned, withIntermediateDirectories: true)
        try overwrite(abandoned + "/session.lock", with: Data())
        try overwrite(abandoned + "/" + String(repeating: "ab", count: 16) + ".entry", with: Data("left over".utf8))
        let live = try DiskResponseStore(directory: directory.url, policy: .perSession)
        try live.write(E.entry("/live"))
        let store = try DiskResponseStore(directory: directory.url)
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        #expect(try live.entry(for: E.entry("/live").key) != nil, "a live session is left alone")
        live.close()
        store.close()
    }

    @Test("opening reads the index, not the bodies")
    func openReadsNoBodies() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        for i in 0..<2000 { try store.write(E.entry("/\(i)", body: "body \(i)")) }
        store.close()
        // Damage every body. If opening read them, it would find and remove them all.
        for name in directory.entryFiles() {
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: directory.path + "/" + name))
            try handle.seek(toOffset: 20)
            handle.write(Data([0xFF, 0xFF, 0xFF, 0xFF]))
            try handle.close()
        }
        let reopened = try DiskResponseStore(directory: directory.url)
        #expect(reopened.entryCount == 2000)
        #expect(directory.entryFiles().count == 2000)
        #expect(throws: HTTPCachingError.self) { try reopened.entry(for: E.entry("/7").key) }
    }

    @Test("a torn last line in the index is ignored")
    func tornIndex() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        try store.write(E.entry("/a"))
        store.close()
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path + "/index.log"))
        handle.seekToEndOfFile()
        handle.write(Data("P 12ab 99 3".utf8))
        try handle.close()
        let reopened = try DiskResponseStore(directory: directory.url)
        #expect(reopened.entryCount == 1)
        #expect(try reopened.entry(for: E.entry("/a").key) != nil)
    }

    @Test("remove-all and remove-since report progress up to the total")
    func progress() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        for i in 0..<1000 { try store.write(E.entry("/\(i)", storedAt: E.base.addingTimeInterval(Double(i)))) }
        var reports: [RemovalProgress] = []
        try store.removeEntries(storedSince: E.base.addingTimeInterval(600)) { reports.append($0) }
        #expect(reports.first == RemovalProgress(removed: 0, total: 400))
        #expect(reports.last == RemovalProgress(removed: 400, total: 400))
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.removed <= $1.removed })
        reports.removeAll()
        try store.removeAll { reports.append($0) }
        #expect(reports.last == RemovalProgress(removed: 600, total: 600))
        #expect(reports.count > 2)
        #expect(directory.entryFiles().isEmpty)
    }

    @Test("the default directory is under XDG_CACHE_HOME, else ~/.cache")
    func defaultDirectory() {
        let url = DiskResponseStore.defaultDirectory
        #expect(url.lastPathComponent == "swift-http-caching")
        if let xdg = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            #expect(url.deletingLastPathComponent().path == URL(fileURLWithPath: xdg).path)
        } else {
            #expect(url.deletingLastPathComponent().lastPathComponent == ".cache")
        }
    }
}
