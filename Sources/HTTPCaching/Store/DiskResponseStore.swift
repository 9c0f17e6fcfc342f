import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A store on disk that survives restarts, with a byte limit, an entry-count limit and a
/// maximum entry size, evicting least recently used entries.
///
/// - Each entry is one file named after the SHA-256 of its key; the file holds the full key,
///   checked on read, so a hash collision is a miss, never the wrong response, and no key can
///   name a path outside the directory.
/// - Writes go to a temporary file that is then renamed: a process killed at any moment leaves
///   every entry either whole or absent. Each file carries a checksum: a damaged, truncated or
///   foreign file is a miss, is removed, and is reported (`ResponseStoreError.corruptEntry`).
/// - Sizes, stored-at times and the order of use live in an index the store owns (an
///   append-only log, compacted when it grows), never in file-system timestamps. Opening reads
///   the index and lists the directory; it reads no bodies.
/// - One store at a time may open a directory: an exclusive lock on `.lock` makes a second
///   opener, in this process or another, fail with `DiskStoreError.directoryInUse`.
/// - The directory is created with permissions 0700 and the files 0600: cached responses can
///   hold private data. Only files the store names (`*.entry`, `*.tmp`, `index.log`, `.lock`)
///   are ever touched.
public final class DiskResponseStore: ResponseStore {
    /// When entries are wiped.
    public enum StoragePolicy: Sendable {
        /// Kept until expired, evicted or removed. The default.
        case permanent
        /// Wiped when the store is opened and when it is closed.
        case perSession
    }

    /// The directory used when none is given: `swift-http-caching` under `$XDG_CACHE_HOME`,
    /// else under `~/.cache`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0, isDirectory: true) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache", isDirectory: true)
        return base.appendingPathComponent("swift-http-caching", isDirectory: true)
    }

    /// Where the entries live.
    public let directory: URL
    /// The most bytes the entries may account for. The default is 256 MiB.
    public let byteLimit: Int
    /// The most entries kept. The default is 100,000.
    public let countLimit: Int
    /// The largest single entry stored; a larger response is still delivered, just not
    /// stored. The default is 16 MiB.
    public let maxEntrySize: Int
    /// Past a limit, entries are evicted until the store is at this fraction of it. The
    /// default is 0.7.
    public let trimRatio: Double
    /// Permanent or per-session. The default is permanent.
    public let policy: StoragePolicy

    private let state: Mutex<State>
    private let path: String

    /// Opens (creating if needed) a store in `directory`.
    /// - Throws: `DiskStoreError` if the directory cannot be created or is in use by another
    ///   store; `CacheConfigurationError` for a negative limit or a ratio outside 0...1.
    public init(directory: URL = DiskResponseStore.defaultDirectory, byteLimit: Int = 256 << 20,
                countLimit: Int = 100_000, maxEntrySize: Int = 16 << 20, trimRatio: Double = 0.7,
                policy: StoragePolicy = .permanent) throws {
        guard byteLimit >= 0, countLimit >= 0, maxEntrySize >= 0 else {
            throw CacheConfigurationError.invalidLimit("byteLimit, countLimit and maxEntrySize must not be negative")
        }
        guard trimRatio >= 0, trimRatio <= 1 else {
            throw CacheConfigurationError.invalidLimit("trimRatio \(trimRatio) is not between 0 and 1")
        }
        self.directory = directory
        self.byteLimit = byteLimit
        self.countLimit = countLimit
        self.maxEntrySize = maxEntrySize
        self.trimRatio = trimRatio
        self.policy = policy
        path = directory.path
        state = Mutex(try State.load(path: path, wipe: policy == .perSession))
        _ = state.withLock { trim(&$0, keeping: nil) }
    }

    deinit { close() }

    /// Writes what is pending, wipes a per-session store, and releases the directory. Later
    /// reads are misses and later writes store nothing. Safe to call twice.
    public func close() {
        let wipe = policy == .perSession
        state.withLock { state in
            guard !state.closed else { return }
            if wipe { state.wipe() } else { state.flushAccesses() }
            state.closeFiles()
        }
    }

    // MARK: - ResponseStore

    /// The entry for a key, read from its file; a damaged file is removed and reported by
    /// throwing `ResponseStoreError.corruptEntry`. Counts as a use.
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        let name = Self.fileName(for: key)
        guard let data = try readFile(name) else {
            state.withLock { state in if state.entries[name] != nil { state.remove(name) } }
            return nil
        }
        let entry: CacheEntry
        do {
            entry = try EntryFileFormat.decode(data, expecting: key)
        } catch {
            if error.description.hasPrefix("the file holds another key") { return nil }
            state.withLock { $0.remove(name, unlinking: true) }
            throw ResponseStoreError.corruptEntry(key: key, reason: error.description)
        }
        state.withLock { state in
            if state.entries[name] == nil {
                state.put(name, size: entry.byteCount, storedAt: entry.storedAt, key: key) // a file the index missed
            }
            state.touch(name)
        }
        return entry
    }

    /// Writes an entry atomically (temporary file, then rename), trimming to `trimRatio` of the
    /// limits once one is passed. An entry over `maxEntrySize` is not stored.
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        let name = Self.fileName(for: entry.key)
        let size = entry.byteCount
        guard size <= maxEntrySize, size <= byteLimit, countLimit > 0 else {
            try removeEntry(for: entry.key)
            return StoreWriteResult(stored: false)
        }
        let temporary = "\(name).\(UInt64.random(in: 0...UInt64.max)).tmp"
        try writeFile(temporary, EntryFileFormat.encode(entry))
        return try state.withLock { state in
            guard !state.closed else {
                unlink(path + "/" + temporary)
                return StoreWriteResult(stored: false)
            }
            guard rename(path + "/" + temporary, path + "/" + name + ".entry") == 0 else {
                let code = errno
                unlink(path + "/" + temporary)
                throw DiskStoreError.io(operation: "rename", path: name, errno: code)
            }
            state.put(name, size: size, storedAt: entry.storedAt, key: entry.key)
            return StoreWriteResult(stored: true, evicted: trim(&state, keeping: name))
        }
    }

    /// Removes the entry for a key and its file.
    public func removeEntry(for key: CacheKey) throws {
        let name = Self.fileName(for: key)
        state.withLock { $0.remove(name, unlinking: true) }
    }

    /// Removes every entry, reporting progress as files are deleted.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        let names = state.withLock { state -> [String] in
            let names = Array(state.entries.keys)
            state.clear()
            return names
        }
        unlinkReporting(names, progress: progress)
    }

    /// Removes every entry whose metadata satisfies `predicate`, reporting progress as files are deleted.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        let names = state.withLock { state -> [String] in
            let names = state.entries.filter { predicate($0.value.info) }.map(\.key)
            for name in names { state.remove(name, unlinking: false) }
            return names
        }
        unlinkReporting(names, progress: progress)
    }

    /// The metadata of every entry, from the index.
    public func entryInfos() -> [StoredEntryInfo] {
        state.withLock { $0.entries.values.map(\.info) }
    }

    /// The bytes the entries account for (see `CacheEntry.byteCount`).
    public var totalBytes: Int { state.withLock { $0.bytes } }
    /// How many entries are stored.
    public var entryCount: Int { state.withLock { $0.entries.count } }

    // MARK: - Files

    /// The file name (without extension) of a key: 64 hex digits, whatever the key holds.
    static func fileName(for key: CacheKey) -> String {
        SHA256.hex(Array(key.description.utf8))
    }

    private func unlinkReporting(_ names: [String], progress: (RemovalProgress) -> Void) {
        progress(RemovalProgress(removed: 0, total: names.count))
        for (index, name) in names.enumerated() {
            unlink(path + "/" + name + ".entry")
            if (index + 1) % 256 == 0 || index + 1 == names.count {
                progress(RemovalProgress(removed: index + 1, total: names.count))
            }
        }
    }

    /// Evicts least recently used entries down to `trimRatio` of the limits, once a limit is
    /// passed. - Returns: the evicted keys.
    private func trim(_ state: inout State, keeping kept: String?) -> [CacheKey] {
        guard state.bytes > byteLimit || state.entries.count > countLimit else { return [] }
        let byteTarget = Int(Double(byteLimit) * trimRatio), countTarget = Int(Double(countLimit) * trimRatio)
        var evicted: [CacheKey] = []
        for (name, meta) in state.entries.sorted(by: { $0.value.access < $1.value.access }) {
            if state.bytes <= byteTarget && state.entries.count <= countTarget { break }
            if name == kept { continue }
            state.remove(name, unlinking: true)
            evicted.append(meta.key)
        }
        return evicted
    }

    private func readFile(_ name: String) throws -> Data? {
        let fd = open(path + "/" + name + ".entry", O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw DiskStoreError.io(operation: "open", path: name, errno: errno)
        }
        defer { closeDescriptor(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw DiskStoreError.io(operation: "stat", path: name, errno: errno) }
        var data = Data(count: Int(info.st_size))
        let complete = data.withUnsafeMutableBytes { buffer in
            transferAll(buffer.count) { offset in read(fd, buffer.baseAddress! + offset, buffer.count - offset) }
        }
        return complete ? data : Data() // a file that shrank under us decodes as corrupt
    }

    private func writeFile(_ name: String, _ data: Data) throws {
        guard writeWholeFile(path + "/" + name, data) else {
            let code = errno
            unlink(path + "/" + name)
            throw DiskStoreError.io(operation: "write", path: name, errno: code)
        }
    }
}

/// Errors opening or using a disk store.
public enum DiskStoreError: Error, Equatable, CustomStringConvertible {
    /// Another store (in this process or another) has the directory open.
    case directoryInUse(path: String)
    /// A file operation failed.
    case io(operation: String, path: String, errno: Int32)

    public var description: String {
        switch self {
        case .directoryInUse(let path):
            "the cache directory \(path) is in use by another store; close it first"
        case .io(let operation, let path, let code):
            "\(operation) \(path) failed: \(String(cString: strerror(code)))"
        }
    }
}

// MARK: - The index

/// What the store knows of each entry without reading it, kept in memory and in
/// `index.log`: one line per change, `P name size storedAt access method url` (put),
/// `R name` (remove), `A name access` (use), `C` (clear). A torn last line is ignored.
private struct State: ~Copyable {
    struct Meta {
        var size: Int
        var storedAt: Double
        var access: UInt64
        var key: CacheKey

        // Interim: the index does not record status and usefulness yet.
        var info: StoredEntryInfo {
            StoredEntryInfo(key: key, byteCount: size, storedAt: Date(timeIntervalSince1970: storedAt), statusCode: 0, usefulUntil: nil)
        }
    }

    let path: String
    var entries: [String: Meta] = [:]
    var bytes = 0
    var sequence: UInt64 = 0
    var pendingAccesses: [String: UInt64] = [:]
    var logFD: Int32 = -1
    var lockFD: Int32 = -1
    var logLines = 0
    var closed = false
    /// Whether opening found the index and the directory out of step (then it is rewritten).
    var reconciled = false

    static func load(path: String, wipe: Bool) throws -> State {
        var state = State(path: path)
        try state.createDirectory()
        state.lockFD = open(path + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard state.lockFD >= 0 else { throw DiskStoreError.io(operation: "open", path: path + "/.lock", errno: errno) }
        guard flock(state.lockFD, LOCK_EX | LOCK_NB) == 0 else {
            closeDescriptor(state.lockFD)
            state.lockFD = -1
            throw DiskStoreError.directoryInUse(path: path)
        }
        let names = state.listNames()
        if wipe {
            for name in names.entries { unlink(path + "/" + name + ".entry") }
            unlink(path + "/index.log")
        } else {
            state.replayLog()
            state.reconcile(with: names.entries)
        }
        for temporary in names.temporaries { unlink(path + "/" + temporary) }
        if wipe || state.logLines > 2 * state.entries.count + 1024 || state.reconciled {
            try state.compactLog()
        } else {
            try state.openLog()
        }
        return state
    }

    private init(path: String) { self.path = path }

    private func createDirectory() throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw DiskStoreError.io(operation: "mkdir", path: path, errno: errno == 0 ? ENOTDIR : errno)
        }
        chmod(path, 0o700)
    }

    /// The entry names and temporary files in the directory (names only: nothing is read).
    private func listNames() -> (entries: [String], temporaries: [String]) {
        var entries: [String] = [], temporaries: [String] = []
        guard let directory = opendir(path) else { return ([], []) }
        defer { closedir(directory) }
        while let item = readdir(directory) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name.hasSuffix(".entry"), name.utf8.count == 70 {
                entries.append(String(name.dropLast(6)))
            } else if name.hasSuffix(".tmp"), name.utf8.count > 68 {
                temporaries.append(name)
            }
        }
        return (entries, temporaries)
    }

    /// Replays `index.log`, working on its bytes (it can hold hundreds of thousands of lines).
    private mutating func replayLog() {
        guard let data = FileManager.default.contents(atPath: path + "/index.log") else { return }
        let bytes = [UInt8](data)
        entries.reserveCapacity(bytes.count / 120)
        var lineStart = 0
        while let newline = bytes[lineStart...].firstIndex(of: 10) { // a torn last line has none: ignored
            replay(bytes[lineStart..<newline])
            logLines += 1
            lineStart = newline + 1
        }
    }

    private mutating func replay(_ line: ArraySlice<UInt8>) {
        let fields = line.split(separator: 32, maxSplits: 6, omittingEmptySubsequences: false)
        guard let kind = fields.first, kind.count == 1 else { return }
        switch (kind.first, fields.count) {
        case (UInt8(ascii: "P"), 7):
            guard let size = Self.integer(fields[2]), let storedAt = Double(String(decoding: fields[3], as: UTF8.self)),
                  let access = Self.integer(fields[4]) else { return }
            let key = CacheKey(method: Self.unescape(fields[5]), normalizedURL: Self.unescape(fields[6]))
            insert(String(decoding: fields[1], as: UTF8.self), Meta(size: size, storedAt: storedAt, access: UInt64(access), key: key))
        case (UInt8(ascii: "R"), 2):
            if let meta = entries.removeValue(forKey: String(decoding: fields[1], as: UTF8.self)) { bytes -= meta.size }
        case (UInt8(ascii: "A"), 3):
            let name = String(decoding: fields[1], as: UTF8.self)
            if let access = Self.integer(fields[2]), entries[name] != nil {
                entries[name]!.access = UInt64(access)
                sequence = max(sequence, UInt64(access))
            }
        case (UInt8(ascii: "C"), 1):
            entries.removeAll()
            bytes = 0
        default:
            return
        }
    }

    /// A non-negative decimal integer, or nil.
    private static func integer(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count < 19 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= 48 && digit <= 57 else { return nil }
            value = value * 10 + Int(digit - 48)
        }
        return value
    }

    /// Drops index entries whose file is gone; adopts entry files the index does not know
    /// (a crash between rename and log), reading only those, and removing any that are damaged.
    private mutating func reconcile(with names: [String]) {
        let present = Set(names)
        for name in entries.keys where !present.contains(name) {
            if let meta = entries.removeValue(forKey: name) { bytes -= meta.size }
            reconciled = true
        }
        for name in names where entries[name] == nil {
            reconciled = true
            if let data = FileManager.default.contents(atPath: path + "/" + name + ".entry"),
               let entry = try? EntryFileFormat.decode(data), DiskResponseStore.fileName(for: entry.key) == name {
                insert(name, Meta(size: entry.byteCount, storedAt: entry.storedAt.timeIntervalSince1970, access: 0, key: entry.key))
            } else {
                unlink(path + "/" + name + ".entry")
            }
        }
    }

    /// Rewrites the log as one line per live entry (temporary file, then rename), and opens
    /// it for appending.
    private mutating func compactLog() throws {
        if logFD >= 0 { closeDescriptor(logFD) }
        var text = ""
        text.reserveCapacity(entries.count * 160)
        for (name, meta) in entries { text += Self.putLine(name, meta) }
        // Written by hand: FileManager.createFile writes through a temporary folder in /tmp on
        // Linux and leaves it behind.
        let temporary = path + "/index.log.\(UInt64.random(in: 0...UInt64.max)).tmp"
        guard writeWholeFile(temporary, Array(text.utf8)), rename(temporary, path + "/index.log") == 0 else {
            let code = errno
            unlink(temporary)
            throw DiskStoreError.io(operation: "write", path: path + "/index.log", errno: code)
        }
        logLines = entries.count
        pendingAccesses.removeAll()
        try openLog()
    }

    mutating func openLog() throws {
        if logFD >= 0 { closeDescriptor(logFD) }
        logFD = open(path + "/index.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard logFD >= 0 else { throw DiskStoreError.io(operation: "open", path: path + "/index.log", errno: errno) }
    }

    private mutating func insert(_ name: String, _ meta: Meta) {
        if let old = entries[name] { bytes -= old.size }
        entries[name] = meta
        bytes += meta.size
        sequence = max(sequence, meta.access)
    }

    mutating func put(_ name: String, size: Int, storedAt: Date, key: CacheKey) {
        sequence += 1
        let meta = Meta(size: size, storedAt: storedAt.timeIntervalSince1970, access: sequence, key: key)
        insert(name, meta)
        pendingAccesses[name] = nil
        append(Self.putLine(name, meta))
    }

    mutating func touch(_ name: String) {
        guard entries[name] != nil else { return }
        sequence += 1
        entries[name]!.access = sequence
        pendingAccesses[name] = sequence
        if pendingAccesses.count >= 512 { flushAccesses() }
    }

    mutating func remove(_ name: String, unlinking: Bool = false) {
        if unlinking { unlink(path + "/" + name + ".entry") }
        guard let meta = entries.removeValue(forKey: name) else { return }
        bytes -= meta.size
        pendingAccesses[name] = nil
        append("R \(name)\n")
    }

    mutating func clear() {
        entries.removeAll()
        bytes = 0
        pendingAccesses.removeAll()
        append("C\n")
    }

    mutating func wipe() {
        for name in entries.keys { unlink(path + "/" + name + ".entry") }
        for name in listNames().entries { unlink(path + "/" + name + ".entry") }
        clear()
        unlink(path + "/index.log")
    }

    mutating func flushAccesses() {
        guard !pendingAccesses.isEmpty else { return }
        var text = ""
        for (name, access) in pendingAccesses { text += "A \(name) \(access)\n" }
        pendingAccesses.removeAll(keepingCapacity: true)
        append(text)
    }

    mutating func closeFiles() {
        if logFD >= 0 { closeDescriptor(logFD) }
        if lockFD >= 0 { closeDescriptor(lockFD) } // releases the lock
        logFD = -1
        lockFD = -1
        closed = true
        entries.removeAll()
        bytes = 0
    }

    /// Appends whole lines with one write, so a crash leaves at most one torn line.
    private mutating func append(_ text: String) {
        guard logFD >= 0 else { return }
        let fd = logFD
        _ = Array(text.utf8).withUnsafeBytes { buffer in
            transferAll(buffer.count) { offset in writeDescriptor(fd, buffer.baseAddress! + offset, buffer.count - offset) }
        }
        logLines += text.utf8.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        if logLines > 4 * entries.count + 4096 { try? compactLog() }
    }

    private static func putLine(_ name: String, _ meta: Meta) -> String {
        "P \(name) \(meta.size) \(meta.storedAt) \(meta.access) \(escape(meta.key.method)) \(escape(meta.key.url))\n"
    }

    private static func escape(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 37 || $0 == 32 || $0 == 10 || $0 == 13 }) else { return text }
        return text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: " ", with: "%20")
            .replacingOccurrences(of: "\n", with: "%0A").replacingOccurrences(of: "\r", with: "%0D")
    }

    private static func unescape(_ field: ArraySlice<UInt8>) -> String {
        let text = String(decoding: field, as: UTF8.self)
        guard field.contains(37) else { return text } // no "%": nothing escaped
        return text.replacingOccurrences(of: "%0D", with: "\r").replacingOccurrences(of: "%0A", with: "\n")
            .replacingOccurrences(of: "%20", with: " ").replacingOccurrences(of: "%25", with: "%")
    }
}

// The store's own `close()` and `write(_:)` hide the C functions inside it; these reach them.
private func closeDescriptor(_ fd: Int32) {
    close(fd)
}

private func writeDescriptor(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// Creates `path` (0600, failing if it exists) holding exactly `bytes`; false on any failure.
private func writeWholeFile<Bytes: ContiguousBytes>(_ path: String, _ bytes: Bytes) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    defer { closeDescriptor(fd) }
    return bytes.withUnsafeBytes { buffer in
        transferAll(buffer.count) { offset in writeDescriptor(fd, buffer.baseAddress! + offset, buffer.count - offset) }
    }
}

/// Repeats a read or write until `count` bytes have moved, retrying after EINTR.
/// - Parameter step: moves bytes from `offset` on; returns what read(2) or write(2) returned.
/// - Returns: false if a step failed or moved nothing before the end.
private func transferAll(_ count: Int, _ step: (_ offset: Int) -> Int) -> Bool {
    var offset = 0
    while offset < count {
        let n = step(offset)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return false }
        offset += n
    }
    return true
}
