import Foundation
import Synchronization

/// Where a cache keeps its entries: memory, disk, Redis, or your own.
///
/// Implementations must be thread-safe: the cache calls them from many threads at once.
/// Reads and writes may block (on a disk, on a server): the cache never calls them on
/// Foundation's shared URLSession queue, only `immediateEntry(for:)`, which must not block.
/// An entry that cannot be read is a miss: one found damaged should be removed and reported
/// by throwing `HTTPCachingError.corruptEntry`. Any other error thrown is reported as a
/// `storeFailed` event, and the request goes on to the network.
///
/// A store of your own implements five requirements: `entry(for:)`, `write(_:)`,
/// `removeEntry(for:)`, `removeEntries(where:progress:)` and `entryInfos()`. The others are
/// capabilities with defaults a store overrides when it can do better (answer from memory,
/// stream a body to disk, count without listing, share claims and a secret across processes).
///
/// `HTTPCachingTestKit.StoreConformance` checks the behaviour every store must show.
public protocol ResponseStore: Sendable {
    /// The entry stored under a key, or nil. Counts as a use for least-recently-used eviction.
    /// - Throws: `HTTPCachingError.corruptEntry` for a damaged entry (removed), or the
    ///   store's own error when it cannot answer.
    func entry(for key: CacheKey) throws -> CacheEntry?

    /// The entry for a key if the store can answer without waiting on I/O (from memory, or
    /// for `DiskResponseStore` from bytes the kernel holds in memory), so a hit can be answered
    /// on the caller's thread, Foundation's shared queue: it must never block. The default is
    /// `.needsIO`.
    func immediateEntry(for key: CacheKey) -> ImmediateLookup

    /// Stores an entry under its key, replacing any earlier one, evicting others as the
    /// store's limits require.
    /// - Returns: whether it was stored and what was evicted to make room.
    /// - Throws: the store's own error when it cannot write.
    @discardableResult
    func write(_ entry: CacheEntry) throws -> StoreWriteResult

    /// Begins storing an entry whose body arrives in parts (a response as it streams from the
    /// origin): the store may write each part as it comes, so nothing holds the whole body.
    /// The default buffers the parts and calls `write(_:)` on commit.
    /// - Throws: the store's own error when it cannot begin a write.
    func makeWriter(for key: CacheKey) throws -> any ResponseStoreWriter

    /// Stores an entry in this process's memory only, never on a disk or a server (what a
    /// task's delegate allows with `.allowedInMemoryOnly`), replacing any earlier one in every
    /// tier. The default is nil: the store keeps nothing in memory of its own.
    /// - Returns: what the write did; nil when the store cannot keep an entry in memory only.
    /// - Throws: the store's own error when it cannot remove an earlier entry.
    func writeInMemory(_ entry: CacheEntry) throws -> StoreWriteResult?

    /// Removes the entry stored under a key, if any.
    /// - Throws: the store's own error when it cannot remove.
    func removeEntry(for key: CacheKey) throws

    /// Removes every entry, reporting progress for large stores. The default removes every
    /// entry `removeEntries(where:progress:)` lists.
    /// - Throws: the store's own error when it cannot remove.
    func removeAll(progress: (RemovalProgress) -> Void) throws

    /// Removes every entry whose metadata satisfies `predicate`, reporting progress.
    /// - Throws: the store's own error when it cannot list or remove.
    func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws

    /// The metadata of every entry, read without reading bodies.
    /// - Throws: the store's own error when it cannot list.
    func entryInfos() throws -> [StoredEntryInfo]

    /// The bytes the stored entries account for (see `CacheEntry.byteCount`). The default adds
    /// up `entryInfos()` (a listing: override it with a count you keep).
    var totalBytes: Int { get }

    /// How many entries are stored. The default counts `entryInfos()`.
    var entryCount: Int { get }

    /// Whether the store keeps its entries in this process's memory, so its reads and writes
    /// never block and may run anywhere. The default is false.
    var answersFromMemory: Bool { get }

    /// A use of an entry that a faster store in front of this one answered (a tiered store's
    /// memory), for least-recently-used order. The default does nothing.
    func noteUse(of key: CacheKey)

    /// The largest entry (`CacheEntry.byteCount`) the store keeps; the cache stops holding a
    /// response's body as soon as it grows past this. The default is `Int.max`.
    var maxEntrySize: Int { get }

    /// The secret that keys credential partitions (HMAC-SHA-256): random, created with the
    /// store and kept as long as its entries. The default is a random secret made once per
    /// process, so a custom store's credentialed entries do not outlive the process.
    /// - Throws: the store's own error when it cannot read or create its secret.
    func partitionSecret() throws -> [UInt8]

    /// Claims the background refresh of a key for `lease` seconds, across every process
    /// sharing the store; false if another holder has it. The default is always true (the
    /// cache already refreshes a key once per process).
    func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool

    /// Gives a claim made with `claimRefresh(of:lease:)` back before its lease ends. The
    /// default does nothing.
    func releaseRefresh(of key: CacheKey)
}

/// What `ResponseStore.immediateEntry(for:)` found without waiting on I/O.
public enum ImmediateLookup: Sendable, Equatable {
    /// The entry, read without waiting (from memory, or from the page cache).
    case found(CacheEntry)
    /// Certainly not stored.
    case absent
    /// Only a read that may block can tell.
    case needsIO
}

/// What a store knows of an entry without reading its body.
public struct StoredEntryInfo: Sendable, Hashable {
    /// The key it is stored under.
    public var key: CacheKey
    /// The normalized URL of the key.
    public var url: String { key.url }
    /// The bytes it accounts for (`CacheEntry.byteCount`).
    public var byteCount: Int
    /// When it was stored.
    public var storedAt: Date
    /// Its HTTP status code.
    public var statusCode: Int
    /// When it stops being of use (`CacheEntry.usefulUntil`); nil: no known end.
    public var usefulUntil: Date?

    /// Metadata with the given parts.
    public init(key: CacheKey, byteCount: Int, storedAt: Date, statusCode: Int, usefulUntil: Date?) {
        self.key = key
        self.byteCount = byteCount
        self.storedAt = storedAt
        self.statusCode = statusCode
        self.usefulUntil = usefulUntil
    }

    /// The metadata of an entry.
    public init(_ entry: CacheEntry) {
        self.init(key: entry.key, byteCount: entry.byteCount, storedAt: entry.storedAt,
                  statusCode: entry.statusCode, usefulUntil: entry.usefulUntil)
    }
}

extension ResponseStore {
    /// Answers `.needsIO`: only a read can tell.
    public func immediateEntry(for key: CacheKey) -> ImmediateLookup { .needsIO }

    /// Removes every entry listed.
    /// - Throws: the store's own error when it cannot list or remove.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        try removeEntries(where: { _ in true }, progress: progress)
    }

    /// The sum of `entryInfos()`'s byte counts; 0 when the store cannot list.
    public var totalBytes: Int { ((try? entryInfos()) ?? []).reduce(0) { $0 + $1.byteCount } }

    /// The number of `entryInfos()`; 0 when the store cannot list.
    public var entryCount: Int { (try? entryInfos())?.count ?? 0 }

    /// False.
    public var answersFromMemory: Bool { false }

    /// Does nothing.
    public func noteUse(of key: CacheKey) {}

    /// A writer that keeps the parts in memory and calls `write(_:)` for each entry on commit.
    /// - Throws: never.
    public func makeWriter(for key: CacheKey) throws -> any ResponseStoreWriter {
        BufferingWriter(self)
    }

    /// Nil: nothing is kept in memory alone.
    /// - Throws: never.
    public func writeInMemory(_ entry: CacheEntry) throws -> StoreWriteResult? { nil }

    /// No limit of its own: `Int.max`.
    public var maxEntrySize: Int { Int.max }

    /// A random secret made once per process.
    /// - Throws: never; stores that keep their secret somewhere throw when they cannot read it.
    public func partitionSecret() throws -> [UInt8] { processSecret }

    /// Always true.
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool { true }

    /// Does nothing.
    public func releaseRefresh(of key: CacheKey) {}

    /// Removes every entry.
    /// - Throws: the store's own error when it cannot remove.
    func removeAll() throws {
        try removeAll(progress: { _ in })
    }

    /// Removes every entry stored at or after `date` (its `storedAt`: for a response from the
    /// network, when its request was sent).
    /// - Throws: the store's own error when it cannot list or remove.
    func removeEntries(storedSince date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try removeEntries(where: { $0.storedAt >= date }, progress: progress)
    }

    /// Removes every entry stored before `date` (its `storedAt`: for a response from the
    /// network, when its request was sent).
    /// - Throws: the store's own error when it cannot list or remove.
    func removeEntries(storedBefore date: Date, progress: (RemovalProgress) -> Void = { _ in }) throws {
        try removeEntries(where: { $0.storedAt < date }, progress: progress)
    }

    /// Removes every entry that can no longer be of use at `now` (past its `usefulUntil`).
    /// - Throws: the store's own error when it cannot list or remove.
    func removeUnusableEntries(at now: Date = Date(), progress: (RemovalProgress) -> Void = { _ in }) throws {
        try removeEntries(where: { $0.usefulUntil.map { $0 <= now } ?? false }, progress: progress)
    }
}

/// The secret `ResponseStore.partitionSecret()` gives by default: random, once per process.
private let processSecret: [UInt8] = (0..<32).map { _ in UInt8.random(in: 0...255) }

/// What a write did.
public struct StoreWriteResult: Sendable, Equatable {
    /// Whether the entry was stored; false when it alone exceeds the store's limits.
    public var stored: Bool
    /// The keys evicted to make room, least recently used first.
    public var evicted: [CacheKey]
    /// Why an entry was not stored, when its size is not the reason; nil (the default) reports
    /// `NotStoredReason.tooLarge`.
    public var notStoredReason: NotStoredReason?

    /// A result with the given parts; no reason (nil) means `tooLarge` when not stored.
    public init(stored: Bool, evicted: [CacheKey] = [], notStoredReason: NotStoredReason? = nil) {
        self.stored = stored
        self.evicted = evicted
        self.notStoredReason = notStoredReason
    }
}

/// How far a large removal has got.
public struct RemovalProgress: Sendable, Equatable {
    /// Entries removed so far.
    public let removed: Int
    /// Entries to remove in all.
    public let total: Int

    /// A progress report with the given counts.
    public init(removed: Int, total: Int) {
        self.removed = removed
        self.total = total
    }
}


/// An entry being written to a store as its body arrives: append the parts, then commit (the
/// entry is stored, whole) or abort (nothing of it remains). Made by
/// `ResponseStore.makeWriter(for:)`; used from one thread at a time.
public protocol ResponseStoreWriter: AnyObject, Sendable {
    /// Adds the next part of the body.
    /// - Throws: the store's own error when it cannot write; abort the writer then.
    func append(_ bytes: Data) throws

    /// The body appended so far, for a last look before committing. A store that keeps it in
    /// a file may map the file (no memory is used until the bytes are read).
    /// - Throws: the store's own error when it cannot read it.
    var body: Data { get throws }

    /// Stores each entry (its metadata; its `body` is ignored) with the body appended, and
    /// ends the writer. Several entries share one body (a response stored under its URL and
    /// under its `Vary` variant).
    /// - Returns: whether all were stored, and what was evicted to make room.
    /// - Throws: the store's own error when it cannot write; nothing of the writer remains.
    func commit(_ entries: [CacheEntry]) throws -> StoreWriteResult

    /// Ends the writer, leaving nothing of it in the store. Safe to call after `commit`.
    func abort()
}

/// The writer a store gets by default: the body in memory, each entry written whole on commit.
final class BufferingWriter: ResponseStoreWriter, @unchecked Sendable {
    private let store: any ResponseStore
    private var buffer = Data()

    init(_ store: any ResponseStore) {
        self.store = store
    }

    func append(_ bytes: Data) { buffer.append(bytes) }

    var body: Data { buffer }

    func commit(_ entries: [CacheEntry]) throws -> StoreWriteResult {
        defer { buffer = Data() }
        var result = StoreWriteResult(stored: true)
        for var entry in entries {
            entry.body = buffer
            let written = try store.write(entry)
            result.stored = result.stored && written.stored
            result.evicted += written.evicted
            result.notStoredReason = result.notStoredReason ?? written.notStoredReason
        }
        return result
    }

    func abort() { buffer = Data() }
}

/// How a claim went, for a store that can tell a claim another holder has from one it could
/// not record (a shared fill waits for the first, never for the second: a store that fails
/// means the network).
enum ClaimOutcome {
    case won, heldElsewhere, failed
}

/// A store whose claims report `ClaimOutcome` (the disk and Redis stores, and a tiered store
/// in front of one).
protocol ReportingClaims {
    /// `claimRefresh(of:lease:)`, saying why not.
    func claim(_ key: CacheKey, lease: TimeInterval) -> ClaimOutcome
}

extension ResponseStore {
    /// The claim's outcome: as the store reports it, else (a store that cannot tell) a refusal
    /// read as another holder's claim.
    func claimOutcome(of key: CacheKey, lease: TimeInterval) -> ClaimOutcome {
        (self as? any ReportingClaims)?.claim(key, lease: lease) ?? (claimRefresh(of: key, lease: lease) ? .won : .heldElsewhere)
    }
}
