import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

@Suite("Disk store hardening")
struct DiskResponseStoreHardeningTests {
    typealias E = StoreConformance

    @Test("index lines with huge numbers are skipped on open, never a crash")
    func hugeNumbersInIndex() throws {
        let directory = TemporaryDirectory()
        var text = ""
        for i in 0..<12 {
            let name = String(repeating: String(i, radix: 16), count: 32)
            text += "P \(name) 999999999999999999 0 1 GET http://x/\(i)\n"
            text += "A \(name) 99999999999999999999999\n"
        }
        let reopened = try Self.reopen(directory, appending: text)
        #expect(reopened.entryCount == 1)
        #expect(reopened.totalBytes == E.entry("/a").byteCount)
    }

    /// A store of one entry ("/a") in `directory`, closed, `lines` appended to its index.log,
    /// and opened again.
    static func reopen(_ directory: TemporaryDirectory, appending lines: String) throws -> DiskResponseStore {
        let store = try DiskResponseStore(directory: directory.url)
        try store.write(E.entry("/a"))
        store.close()
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path + "/index.log"))
        handle.seekToEndOfFile()
        handle.write(Data(lines.utf8))
        try handle.close()
        return try DiskResponseStore(directory: directory.url)
    }

    /// A journal line with the given fields and a valid checksum.
    static func checkedLine(_ body: String) -> String {
        let check = XXH3.hash(Array(body.utf8))
        return body + " " + String(repeating: "0", count: 16 - String(check, radix: 16).count) + String(check, radix: 16) + "\n"
    }

    @Test("well-formed index lines with out-of-range numbers are skipped, never trusted or summed")
    func hugeNumbersWithValidChecksums() throws {
        let directory = TemporaryDirectory()
        var text = ""
        for i in 0..<12 {
            let key = E.entry("/huge/\(i)").key
            let name = DiskResponseStore.fileName(for: key)
            let stored = String(E.base.timeIntervalSinceReferenceDate.bitPattern, radix: 16)
            for size in ["999999999999999999", "99999999999999999999999", "1099511627777", "-1", "1e9", ""] {
                text += Self.checkedLine("P \(name) \(size) \(stored) 200 - 0000000000000001 \(key.storageString)")
            }
            text += Self.checkedLine("P \(name) 10 \(stored) 99999999999999999999 - 0000000000000001 \(key.storageString)")
            text += Self.checkedLine("A \(name) 99999999999999999999")
        }
        let reopened = try Self.reopen(directory, appending: text)
        #expect(reopened.entryCount == 1)
        #expect(reopened.totalBytes == E.entry("/a").byteCount)
        // The same through the parser alone: a size at the bound is kept, one past it is not.
        let key = E.entry("/bound").key, name = DiskResponseStore.fileName(for: key)
        let stored = String(E.base.timeIntervalSinceReferenceDate.bitPattern, radix: 16)
        for (size, kept) in [(Journal.maxSize, true), (Journal.maxSize + 1, false)] {
            let line = Array(Self.checkedLine("P \(name) \(size) \(stored) 200 - 0000000000000001 \(key.storageString)").utf8.dropLast())
            #expect((line.withUnsafeBytes { Journal.parse($0) } != nil) == kept, "size \(size)")
        }
        reopened.close()
    }

    @Test("a damaged index line is skipped; the lines around it count")
    func damagedIndexLine() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        for path in ["/a", "/b", "/c"] { try store.write(E.entry(path)) }
        store.close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: directory.path + "/index.log"))
        let lines = bytes.split(separator: 10, omittingEmptySubsequences: false)
        let second = lines[0].count + 1 + 40 // a byte inside the second line
        bytes[second] = bytes[second] == UInt8(ascii: "7") ? UInt8(ascii: "8") : UInt8(ascii: "7")
        try overwrite(directory.path + "/index.log", with: bytes)
        // The damaged line's entry file is still there: adopted from the file itself.
        let reopened = try DiskResponseStore(directory: directory.url)
        #expect(reopened.entryCount == 3)
        #expect(Set(reopened.entryInfos().map(\.key)) == Set(["/a", "/b", "/c"].map { E.entry($0).key }))
        reopened.close()
    }

    @Test("a FIFO named like an entry is a miss, without hanging the reader")
    func fifo() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let key = E.entry("/fifo").key
        let path = directory.path + "/" + DiskResponseStore.fileName(for: key) + ".entry"
        #expect(mkfifo(path, 0o600) == 0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? store.entry(for: key)
            done.signal()
        }
        let finished = done.wait(timeout: .now() + 5) == .success
        #expect(finished, "the read hung in open")
        if !finished { // let the stuck reader go
            let fd = open(path, O_WRONLY)
            if fd >= 0 { close(fd) }
            _ = done.wait(timeout: .now() + 5)
        }
    }

    /// A store in a new directory holding one entry, and the path of that entry's file.
    static func storeWithEntry(_ url: String) throws -> (TemporaryDirectory, DiskResponseStore, CacheEntry, String) {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let entry = E.entry(url)
        try store.write(entry)
        return (directory, store, entry, directory.path + "/" + DiskResponseStore.fileName(for: entry.key) + ".entry")
    }

    @Test("an entry file grown to 64 GiB is a miss, never a 64 GiB allocation")
    func sparseHugeFile() throws {
        let (directory, store, entry, path) = try Self.storeWithEntry("/big")
        defer { withExtendedLifetime(directory) {} }
        #expect(truncate(path, 64 << 30) == 0)
        #expect((try? store.entry(for: entry.key)) == nil)
    }

    @Test("an index.log that is a symbolic link is never followed")
    func symlinkedIndex() throws {
        let directory = TemporaryDirectory()
        let store = directory.url.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let victim = directory.path + "/victim.txt"
        try overwrite(victim, with: Data("keep".utf8))
        #expect(symlink(victim, store.path + "/index.log") == 0)
        let opened = try DiskResponseStore(directory: store)
        try opened.write(E.entry("/a"))
        opened.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("keep".utf8))
    }

    @Test("an entry file that is a symbolic link is never served")
    func symlinkedEntry() throws {
        let directory = TemporaryDirectory()
        let location = directory.url.appendingPathComponent("store")
        let store = try DiskResponseStore(directory: location)
        let entry = E.entry("/a")
        try store.write(entry)
        let path = location.path + "/" + DiskResponseStore.fileName(for: entry.key) + ".entry"
        let outside = directory.path + "/outside.entry"
        #expect(rename(path, outside) == 0)
        #expect(symlink(outside, path) == 0)
        #expect((try? store.entry(for: entry.key)) == nil)
        #expect(FileManager.default.fileExists(atPath: outside))
    }

    @Test("a directory in an entry's place is a miss, and removed: the key is stored again")
    func directoryInPlaceOfEntry() throws {
        let (directory, store, entry, path) = try Self.storeWithEntry("/a")
        defer { withExtendedLifetime(directory) {} }
        #expect(unlink(path) == 0)
        #expect(mkdir(path, 0o700) == 0)
        #expect(mkdir(path + "/inner", 0o700) == 0)
        #expect(FileManager.default.createFile(atPath: path + "/inner/file", contents: Data("x".utf8)))
        #expect(throws: HTTPCachingError.self) { try store.entry(for: entry.key) }
        #expect(!FileManager.default.fileExists(atPath: path))
        try store.write(entry)
        #expect(try store.entry(for: entry.key)?.body == entry.body)
    }

    @Test("lock and secret files that are symbolic links are never followed")
    func symlinkedControlFiles() throws {
        let directory = TemporaryDirectory()
        let location = directory.url.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: location, withIntermediateDirectories: true)
        let names = [".lock", "maintenance.lock", "claims.lock", "secret"]
        for name in names { #expect(symlink(directory.path + "/outside-" + name, location.path + "/" + name) == 0) }
        let store = try DiskResponseStore(directory: location)
        try store.write(E.entry("/a"))
        #expect(store.partitionSecret().count == 32)
        _ = store.claimRefresh(of: E.entry("/a").key, lease: 30)
        store.close()
        for name in names { #expect(!FileManager.default.fileExists(atPath: directory.path + "/outside-" + name), "\(name)") }
    }

    @Test("a store directory owned by another user is refused")
    func notOwned() throws {
        let directory = TemporaryDirectory()
        let location = directory.url.appendingPathComponent("store")
        let path: String
        let owner: UInt32
        if geteuid() == 0 {
            try FileManager.default.createDirectory(at: location, withIntermediateDirectories: true)
            #expect(chown(location.path, 65534, 65534) == 0)
            (path, owner) = (location.path, 65534)
        } else {
            (path, owner) = ("/", 0) // owned by root
        }
        #expect(throws: HTTPCachingError.notOwned(path: path, owner: owner)) {
            try DiskResponseStore(directory: URL(fileURLWithPath: path))
        }
        #expect(FileManager.default.subpaths(atPath: path)?.isEmpty ?? true || path == "/", "nothing was created in it")
    }
}
