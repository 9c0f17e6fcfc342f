import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPCaching

/// The disk store against plain files holding the same bytes (the floor), and its open time
/// with many entries.
struct DiskBench {
    let directory: URL
    let rounds: Int

    init(rounds: Int) {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-\(UUID().uuidString)")
        self.rounds = rounds
    }

    func cleanUp() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Median milliseconds to open a store holding `count` small entries (after writing them).
    func openTime(count: Int) throws -> (writeSeconds: Double, openMillis: Double) {
        let location = directory.appendingPathComponent("open")
        let start = now()
        do {
            let store = try DiskResponseStore(directory: location, byteLimit: 1 << 30, countLimit: count * 2)
            for i in 0..<count { try store.write(entry("/small/\(i)", body: Data("small body \(i)".utf8))) }
            store.close()
        }
        let written = now() - start
        let opens = try (0..<3).map { _ -> Double in
            let begin = now()
            let store = try DiskResponseStore(directory: location, byteLimit: 1 << 30, countLimit: count * 2)
            let elapsed = now() - begin
            precondition(store.entryCount == count, "the reopened store lost entries")
            store.close()
            return elapsed * 1000
        }
        return (written, median(opens))
    }

    /// Median seconds per read and per write, for the store and for plain files.
    func readWrite(bytes: Int, operations: Int) throws -> [String: Double] {
        let body = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let store = try DiskResponseStore(directory: directory.appendingPathComponent("rw-\(bytes)"), byteLimit: 1 << 30)
        defer { store.close() }
        let plain = directory.appendingPathComponent("plain-\(bytes)").path
        mkdir(plain, 0o700)
        let keys = (0..<8).map { entry("/rw/\(bytes)/\($0)", body: body) }
        for item in keys { try store.write(item) }
        for k in 0..<8 { Self.writePlain("\(plain)/\(k)", body) }

        var samples: [String: [Double]] = [:]
        for _ in 0..<rounds {
            for variant in ["store_write", "file_write", "store_read", "file_read"].shuffled() {
                let start = now()
                for i in 0..<operations {
                    switch variant {
                    case "store_write": try store.write(keys[i % 8])
                    case "file_write": Self.writePlain("\(plain)/\(i % 8)", body)
                    case "store_read":
                        let read = try store.entry(for: keys[i % 8].key)
                        precondition(read?.body.count == bytes)
                    default: precondition(Self.readPlain("\(plain)/\(i % 8)").count == bytes)
                    }
                }
                samples[variant, default: []].append((now() - start) / Double(operations))
            }
        }
        return samples.mapValues(median)
    }

    /// Seconds per store read (on an I/O queue's terms: `entry(for:)`), per in-place store
    /// read (`immediateEntry(for:)`, the bytes in the page cache) and per plain-file read of
    /// the same bytes, reads only (for a profiler: no writes in between).
    func reads(bytes: Int, operations: Int) throws -> (store: Double, inPlace: Double, file: Double) {
        let body = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let store = try DiskResponseStore(directory: directory.appendingPathComponent("reads-\(bytes)"), byteLimit: 1 << 30)
        defer { store.close() }
        let plain = directory.appendingPathComponent("plain-reads-\(bytes)").path
        mkdir(plain, 0o700)
        let keys = (0..<8).map { entry("/reads/\(bytes)/\($0)", body: body) }
        for item in keys { try store.write(item) }
        for k in 0..<8 { Self.writePlain("\(plain)/\(k)", body) }
        var start = now()
        for i in 0..<operations {
            let read = try store.entry(for: keys[i % 8].key)
            precondition(read?.body.count == bytes)
        }
        let storeSeconds = (now() - start) / Double(operations)
        start = now()
        for i in 0..<operations {
            guard case .found(let read) = store.immediateEntry(for: keys[i % 8].key) else { preconditionFailure("not read in place") }
            precondition(read.body.count == bytes)
        }
        let inPlaceSeconds = (now() - start) / Double(operations)
        start = now()
        for i in 0..<operations { precondition(Self.readPlain("\(plain)/\(i % 8)").count == bytes) }
        return (storeSeconds, inPlaceSeconds, (now() - start) / Double(operations))
    }

    /// Store reads per second, summed over two processes (this one and a copy of it started
    /// with `--shared-reader`) reading 64 entries of 1 KB from one directory at once.
    func sharedHits(seconds: Double) throws -> Double {
        let location = directory.appendingPathComponent("shared")
        let store = try DiskResponseStore(directory: location, byteLimit: 1 << 30)
        defer { store.close() }
        let body = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let keys = (0..<64).map { entry("/shared/\($0)", body: body) }
        for item in keys { try store.write(item) }
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = ["--shared-reader", location.path, String(seconds)]
        let input = Pipe(), output = Pipe()
        child.standardInput = input
        child.standardOutput = output
        try child.run()
        let reader = output.fileHandleForReading
        _ = readLine(reader) // "ready": its store is open
        input.fileHandleForWriting.write(Data("go\n".utf8))
        let mine = try Self.readFor(seconds: seconds, store: store, keys: keys.map(\.key))
        let theirs = Int(readLine(reader) ?? "") ?? 0
        child.waitUntilExit()
        return Double(mine + theirs) / seconds
    }

    /// Reads `keys` round-robin for `seconds`. - Returns: how many reads.
    static func readFor(seconds: Double, store: DiskResponseStore, keys: [CacheKey]) throws -> Int {
        let end = now() + seconds
        var reads = 0
        while now() < end {
            for key in keys.prefix(16) {
                let read = try store.entry(for: key)
                precondition(read?.body.count == 1024)
            }
            reads += 16
        }
        return reads
    }

    /// The second process of `sharedHits`: opens the store, says "ready", waits for a line,
    /// reads for `seconds`, prints how many reads.
    static func sharedReader(location: String, seconds: Double) throws {
        let store = try DiskResponseStore(directory: URL(fileURLWithPath: location), byteLimit: 1 << 30)
        let keys = (0..<64).map { CacheKey(url: URL(string: "http://bench.test/shared/\($0)")!) }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        _ = Swift.readLine()
        let reads = try readFor(seconds: seconds, store: store, keys: keys.reversed())
        FileHandle.standardOutput.write(Data("\(reads)\n".utf8))
        store.close()
    }

    private func readLine(_ handle: FileHandle) -> String? {
        var line = Data()
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([10]) { break }
            line += byte
        }
        return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
    }

    private func entry(_ path: String, body: Data) -> CacheEntry {
        let url = URL(string: "http://bench.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200,
                          headers: ["Content-Type": "application/octet-stream"], body: body, storedAt: Date())
    }

    /// Writes a whole file the plainest way: temporary file, write, rename (as atomically as
    /// the store, so the comparison is fair).
    static func writePlain(_ path: String, _ data: Data) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
        close(fd)
        rename(temporary, path)
    }

    static func readPlain(_ path: String) -> Data {
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        var data = Data(count: Int(info.st_size))
        data.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = read(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
        return data
    }
}
