import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A store on disk that survives restarts and that any number of processes can share, with
/// a byte limit, an entry-count limit and a maximum entry size, evicting least recently used
/// entries.
///
/// - Each entry is one immutable file, written to a temporary file and renamed into place, so
///   a process killed at any moment leaves every entry whole or absent. Its name is a hash of
///   the key; the file holds the full key, compared on every read, so a hash collision is a
///   miss, never the wrong response, and no key can name a path outside the directory. Each
///   file carries checksums: a damaged, truncated or foreign file is a miss, is removed, and
///   is reported (`HTTPCachingError.corruptEntry`).
/// - Readers never lock anything on disk and never wait on a writer: they open, read and
///   check. Sizes, stored-at times and the order of use live in `index.log`, a journal every
///   process appends to (one write per change) and reads to learn the others' changes.
/// - Trimming to the limits and compacting the journal run on the store's own background
///   queue, one process at a time, never inside a read or a write. A limit can be passed by
///   what is written while a trim is pending, by at most a tenth of the limit (or one entry)
///   as this process sees the store: a write past that waits for the trim.
/// - Nothing is followed through a symbolic link; the directory must belong to the user
///   (it is made 0700, files 0600: cached responses can hold private data). Only names the
///   store makes are touched: `*.entry`, `*.tmp`, `index.log`, `secret`, the lock files and
///   the `claims` and `sessions` folders.
public final class DiskResponseStore: ResponseStore {
    /// When entries are wiped.
    public enum StoragePolicy: Sendable {
        /// Kept until expired, evicted or removed, and shared with every store that opens the
        /// directory. The default.
        case permanent
        /// Private to this store: kept in a folder of its own under `sessions`, which closing
        /// the store removes (as does the next store to open the directory, after a crash).
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
    /// The transform bodies are stored with (compression, encryption); nil stores them as they
    /// are. Entries written with another transform, or none, are misses. The default is nil.
    public let transform: (any StoreTransform)?

    /// Called on the store's background queue with the keys a background trim evicted, least
    /// recently used first. Each eviction is reported once: here, or, without a handler (or to
    /// a write that waited for the trim), in the `evicted` of a write's result. The default is nil.
    var evictionHandler: (@Sendable ([CacheKey]) -> Void)? {
        get { handler.withLock { $0 } }
        set { handler.withLock { $0 = newValue } }
    }

    /// Called with the keys whose entries another process replaced or removed, as the journal
    /// tells them (nil: every entry, after a removal of all), outside the store's lock; a
    /// tiered store drops them from memory. The default is nil.
    var changeHandler: (@Sendable ([CacheKey]?) -> Void)? {
        get { changes.withLock { $0 } }
        set { changes.withLock { $0 = newValue } }
    }

    /// The folder the files are in: `directory`, or a session's own folder.
    let files: StoreDirectory
    let claimsFolder: StoreDirectory
    let session: StoreSession?
    let maintenanceLock: FileHandleRef
    let secret: [UInt8]
    /// The largest file a read accepts (a larger one is a miss, never an allocation).
    let maxFileSize: Int
    let state: Mutex<State>
    let closed = Atomic<Bool>(false)
    let queue = DispatchQueue(label: "swift-http-caching.disk-store", qos: .utility)
    let pending = DispatchGroup()
    private let handler = Mutex<(@Sendable ([CacheKey]) -> Void)?>(nil)
    private let changes = Mutex<(@Sendable ([CacheKey]?) -> Void)?>(nil)
    /// The metadata of recently read entries, so reading one again skips parsing it.
    let decodedMetadata = MetadataCache<EntryName>()
    /// Whether reads are tried in place (`immediateEntry(for:)`): without a transform, on a
    /// local disk file system of a kernel that can read without waiting; turned off the first
    /// time it cannot.
    let inPlaceReads: Atomic<Bool>
    /// The entry files in-place reads keep open.
    let openFiles = OpenEntryFiles()

    /// Opens (creating if needed) a store in `directory`, which other stores, in this process
    /// or others, may have open too.
    /// - Throws: `HTTPCachingError.notOwned` if another user owns the directory, `.io` if it
    ///   cannot be created or read; `HTTPCachingError` for a negative limit or a ratio
    ///   outside 0...1.
    public init(directory: URL = DiskResponseStore.defaultDirectory, byteLimit: Int = 256 << 20,
                countLimit: Int = 100_000, maxEntrySize: Int = 16 << 20, trimRatio: Double = 0.7,
                policy: StoragePolicy = .permanent, transform: (any StoreTransform)? = nil) throws {
        guard byteLimit >= 0, countLimit >= 0, maxEntrySize >= 0 else {
            throw HTTPCachingError.invalidLimit("byteLimit, countLimit and maxEntrySize must not be negative")
        }
        guard trimRatio >= 0, trimRatio <= 1 else {
            throw HTTPCachingError.invalidLimit("trimRatio \(trimRatio) is not between 0 and 1")
        }
        self.directory = directory
        self.byteLimit = byteLimit
        self.countLimit = countLimit
        self.maxEntrySize = maxEntrySize
        self.trimRatio = trimRatio
        self.policy = policy
        self.transform = transform
        maxFileSize = maxEntrySize > (Int.max - 65_536) / 2 ? Int.max : maxEntrySize * 2 + 65_536

        let base = try StoreDirectory(creating: directory.path)
        StoreSession.sweep(base)
        if policy == .perSession {
            let session = try StoreSession(in: base)
            self.session = session
            files = session.folder
        } else {
            session = nil
            files = base
        }
        secret = try Self.loadSecret(files)
        maintenanceLock = FileHandleRef(fd: try files.openControlFile("maintenance.lock", O_RDWR))
        claimsFolder = try files.subdirectory("claims")
        // A transform is code of the store's user (decompression, decryption): never run on
        // Foundation's queue.
        inPlaceReads = Atomic(transform == nil && NonBlockingFiles.isLocalDisk(files.fd))
        let journal = FileHandleRef(fd: try files.openControlFile("index.log", O_RDWR | O_APPEND))
        state = Mutex(State(journal: journal))
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(self))
        tail()
        reconcile()
        scheduleMaintenance()
    }

    deinit { close() }

    /// Writes the uses not yet recorded, removes a per-session store's files, and lets go of
    /// the directory. Later reads are misses and later writes store nothing. Safe to call twice.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        waitForMaintenance(timeout: 5)
        openFiles.removeAll()
        flushAccesses()
        session?.remove()
        state.withLock { state in
            state.index.clear()
            state.pendingAccesses.removeAll()
            state.journal = nil
            state.replayed = nil
        }
    }

    var isClosed: Bool { closed.load(ordering: .acquiring) }

    // MARK: - ResponseStore

    /// The entry for a key, read from its file and checked; a damaged file is removed and
    /// reported by throwing `HTTPCachingError.corruptEntry`. Counts as a use.
    /// - Throws: `HTTPCachingError.corruptEntry`, or `HTTPCachingError.io` if the file cannot
    ///   be read.
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        guard !isClosed else { return nil }
        let keyBytes = EntryName.storageBytes(of: key)
        let name = EntryName(storageBytes: keyBytes)
        guard let fd = try openEntry(name, key) else { return nil }
        defer { closeDescriptor(fd) }
        let info = try checkedStatus(of: fd, name, key)
        // Checked before allocating: a file grown past any entry this store writes is a miss.
        guard info.st_size <= maxFileSize else { return nil }
        guard let entry = try readEntry(fd, info: info, name, expecting: (key, keyBytes)) else { return nil }
        recordRead(of: name, entry)
        return entry
    }

    /// The entry file opened for reading; nil if it is not there (forgotten then). A symbolic
    /// link in its place is removed and reported as corrupt.
    private func openEntry(_ name: EntryName, _ key: CacheKey) throws -> Int32? {
        let fd = name.withFileName { files.open($0, O_RDONLY) }
        guard fd < 0 else { return fd }
        let code = errno
        if code == ENOENT {
            state.withLock { _ = $0.index.remove(name) } // removed by another process
            return nil
        }
        if code == ELOOP { // a symbolic link in an entry's place: never followed
            files.unlink(name.fileName)
            throw removedAsCorrupt(name, key, reason: "the entry is a symbolic link")
        }
        throw HTTPCachingError.io(operation: "open", path: files.path + "/" + name.fileName, errno: code)
    }

    /// The status of an open entry file, which must be a regular file of this user (anything
    /// else is removed and reported as corrupt).
    private func checkedStatus(of fd: Int32, _ name: EntryName, _ key: CacheKey) throws -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw HTTPCachingError.io(operation: "stat", path: files.path + "/" + name.fileName, errno: errno)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == files.owner else {
            files.unlink(name.fileName, ifStill: info)
            throw removedAsCorrupt(name, key, reason: "the entry is not a regular file of this user")
        }
        return info
    }

    /// Counts a read as a use: in the index now, in the journal with the next batch. An entry
    /// replaced since the journal was read is a change `changeHandler` hears of now (the
    /// journal's line for it will find the index up to date).
    func recordRead(of name: EntryName, _ entry: CacheEntry) {
        let (wantsFlush, replaced) = state.withLock { state -> (Bool, Bool) in
            var replaced = false
            switch state.index.touch(name, ifGeneration: entry.generation) {
            case .touched: break
            case .unknown: return (false, false) // the journal will tell
            case .otherGeneration:
                state.index.put(name, IndexEntry(entry)) // replaced since we read the journal
                replaced = true
            }
            state.pendingAccesses.append(name)
            return (state.pendingAccesses.count >= Self.accessBatch && state.maintenance == .idle, replaced)
        }
        if replaced, let handler = changeHandler { handler([entry.key]) }
        if wantsFlush { scheduleMaintenance() }
    }

    /// Writes an entry atomically (temporary file, then rename) and schedules a trim once a
    /// limit is passed. An entry over `maxEntrySize` is not stored (and removes the older one).
    /// - Returns: whether it was stored; the keys evicted in the background since the last
    ///   write reported them (all of them without an `evictionHandler`, else those of a trim
    ///   it had to wait for).
    /// - Throws: `HTTPCachingError.io` if the file cannot be written.
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        guard !isClosed else { return StoreWriteResult(stored: false) }
        let name = EntryName(entry.key)
        var entry = entry
        if let transform { entry.body = try transform.encode(entry.body) }
        let size = entry.byteCount
        let tail = size <= maxEntrySize ? EntryFileFormat.encodeTail(entry, transform: transform?.name) : []
        guard size <= maxEntrySize, size <= byteLimit, countLimit > 0,
              entry.body.count <= maxFileSize - tail.count else {
            try removeEntry(named: name)
            return StoreWriteResult(stored: false)
        }
        let temporary = Self.temporaryName()
        let created = entry.body.withUnsafeBytes { body in
            tail.withUnsafeBytes { files.createFile(temporary, [body, $0]) }
        }
        guard created else {
            throw HTTPCachingError.io(operation: "write", path: files.path + "/" + temporary, errno: errno)
        }
        return try install(temporary, as: name, IndexEntry(entry))
    }

    /// A name for a file being written: this process's id (so an abandoned one is recognised)
    /// and a random part.
    static func temporaryName() -> String { "\(getpid()).\(randomHex()).tmp" }

    /// Renames a written file into place and records it in the index and the journal, trimming
    /// as the limits require.
    /// - Throws: `HTTPCachingError.io` if the rename fails (the file is then removed).
    func install(_ temporary: String, as name: EntryName, _ record: IndexEntry) throws -> StoreWriteResult {
        guard files.rename(temporary, to: name.fileName) else {
            let code = errno
            files.unlink(temporary)
            throw HTTPCachingError.io(operation: "rename", path: files.path + "/" + name.fileName, errno: code)
        }
        let overCeiling = state.withLock { state -> Bool? in
            guard !isClosed else { return nil }
            state.index.put(name, record)
            return state.index.bytes > byteCeiling || state.index.count > countCeiling
        }
        guard let overCeiling else { return StoreWriteResult(stored: false) }
        append([.put(name, record)])
        scheduleMaintenance()
        if overCeiling { waitForTrim() }
        return StoreWriteResult(stored: true, evicted: takeEvictions(waited: overCeiling))
    }

    /// Removes the entry for a key and its file.
    /// - Throws: `HTTPCachingError.io` if the file cannot be removed.
    public func removeEntry(for key: CacheKey) throws {
        try removeEntry(named: EntryName(key))
    }

    /// The store's secret: 32 random bytes in the file `secret`, made with the directory and
    /// shared by every process that opens it.
    public func partitionSecret() -> [UInt8] { secret }

    /// Counts a use of a key served from elsewhere (a tiered store's memory), without I/O:
    /// recorded in the index by the next maintenance pass.
    public func noteUse(of key: CacheKey) {
        let schedule = state.withLock { state -> Bool in
            state.pendingKeyUses.append(key)
            return state.pendingKeyUses.count >= Self.accessBatch && state.maintenance == .idle
        }
        if schedule { scheduleMaintenance() }
    }

    /// The file name (without extension) of a key: 32 hex digits, whatever the key holds.
    static func fileName(for key: CacheKey) -> String {
        EntryName(key).hex
    }

    // MARK: - Helpers

    /// Uses recorded in memory before they are appended to the journal in one write.
    static let accessBatch = 64

    /// A limit plus the overshoot a write may leave for the background trim.
    var byteCeiling: Int { byteLimit.addingReportingOverflow(byteLimit / 10).overflow ? Int.max : byteLimit + byteLimit / 10 }
    var countCeiling: Int { countLimit.addingReportingOverflow(max(1, countLimit / 10)).overflow ? Int.max : countLimit + max(1, countLimit / 10) }

    private func removeEntry(named name: EntryName) throws {
        guard !isClosed else { return }
        let known = state.withLock { state in
            return state.index.remove(name) != nil
        }
        let unlinked = files.unlink(name.fileName)
        if !unlinked && errno != ENOENT {
            throw HTTPCachingError.io(operation: "unlink", path: files.path + "/" + name.fileName, errno: errno)
        }
        if known || unlinked { append([.remove(name)]) }
    }

    /// Drops a name from the index and tells the other processes.
    func forget(_ name: EntryName) {
        let known = state.withLock { state in
            return state.index.remove(name) != nil
        }
        if known { append([.remove(name)]) }
    }

    func removedAsCorrupt(_ name: EntryName, _ key: CacheKey, reason: String) -> HTTPCachingError {
        forget(name)
        return .corruptEntry(key: key, reason: reason)
    }
}

