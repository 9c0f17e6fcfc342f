import Foundation
import Synchronization

/// A store in memory with a byte limit and an entry-count limit, evicting least recently
/// used entries.
///
/// A dictionary plus a doubly linked list, both under one `Mutex`: every read, write and
/// eviction is O(1). Not `NSCache`, which is not least-recently-used and evicts on its own
/// schedule. An entry larger than the byte limit is not stored.
public final class MemoryResponseStore: ResponseStore {
    /// The most bytes the entries may account for. The default is 64 MiB.
    public let byteLimit: Int
    /// The most entries kept. The default is 10,000.
    public let countLimit: Int
    /// The largest single entry kept; a larger response is still delivered, just not stored.
    /// The default is an eighth of `byteLimit` (8 MiB for the default limit).
    public let maxEntrySize: Int

    private let state: Mutex<LRUList>
    private let secret: [UInt8] = (0..<32).map { _ in UInt8.random(in: 0...255) }

    /// A store with the given limits.
    /// - Parameter maxEntrySize: the largest entry kept; nil for an eighth of `byteLimit`.
    /// - Throws: `HTTPCachingError.invalidLimit` if a limit is negative.
    public init(byteLimit: Int = 64 << 20, countLimit: Int = 10_000, maxEntrySize: Int? = nil) throws(HTTPCachingError) {
        guard byteLimit >= 0 else { throw .invalidLimit("byteLimit \(byteLimit) is negative") }
        guard countLimit >= 0 else { throw .invalidLimit("countLimit \(countLimit) is negative") }
        if let maxEntrySize, maxEntrySize < 0 { throw .invalidLimit("maxEntrySize \(maxEntrySize) is negative") }
        self.byteLimit = byteLimit
        self.countLimit = countLimit
        self.maxEntrySize = min(maxEntrySize ?? byteLimit / 8, byteLimit)
        self.state = Mutex(LRUList())
    }

    /// A store with the default limits: 64 MiB, 10,000 entries, 8 MiB per entry.
    public convenience init() {
        try! self.init(byteLimit: 64 << 20, countLimit: 10_000)
    }

    /// The entry for a key, made the most recently used.
    public func entry(for key: CacheKey) -> CacheEntry? {
        state.withLock { $0.touch(key)?.entry }
    }

    /// Answers from memory, always: `.found` or `.absent`.
    public func immediateEntry(for key: CacheKey) -> ImmediateLookup {
        entry(for: key).map(ImmediateLookup.found) ?? .absent
    }

    /// Stores an entry as the most recently used, evicting the least recently used ones past
    /// a limit. An entry over `maxEntrySize` is not stored and removes the old one.
    @discardableResult
    public func write(_ entry: CacheEntry) -> StoreWriteResult {
        let size = entry.byteCount
        return state.withLock { list in
            guard size <= maxEntrySize, countLimit > 0 else {
                list.remove(entry.key)
                return StoreWriteResult(stored: false)
            }
            list.insertAtFront(entry, size: size)
            var evicted: [CacheKey] = []
            while list.bytes > byteLimit || list.count > countLimit, let victim = list.removeLeastRecent() {
                evicted.append(victim)
            }
            return StoreWriteResult(stored: true, evicted: evicted)
        }
    }

    /// True: this store is memory.
    public var answersFromMemory: Bool { true }

    /// The same as `write(_:)`: this store is memory.
    public func writeInMemory(_ entry: CacheEntry) -> StoreWriteResult? {
        write(entry)
    }

    /// Removes the entry for a key.
    public func removeEntry(for key: CacheKey) {
        state.withLock { _ = $0.remove(key) }
    }

    /// Removes every entry, reporting the start and the end.
    public func removeAll(progress: (RemovalProgress) -> Void) {
        let total = state.withLock { list in
            let count = list.count
            list = LRUList()
            return count
        }
        progress(RemovalProgress(removed: total, total: total))
    }

    /// Removes every entry whose metadata satisfies `predicate`.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) {
        // The predicate runs outside the lock: it is the caller's code.
        let chosen = entryInfos().filter(predicate)
        progress(RemovalProgress(removed: 0, total: chosen.count))
        state.withLock { list in
            for info in chosen where list.peek(info.key)?.storedAt == info.storedAt { list.remove(info.key) }
        }
        progress(RemovalProgress(removed: chosen.count, total: chosen.count))
    }

    /// The metadata of every entry.
    public func entryInfos() -> [StoredEntryInfo] {
        state.withLock { list in list.keys { _ in true }.compactMap { list.peek($0).map(StoredEntryInfo.init) } }
    }

    /// The store's own random secret, made with it.
    public func partitionSecret() -> [UInt8] { secret }

    /// The bytes the entries account for (see `CacheEntry.byteCount`).
    public var totalBytes: Int { state.withLock { $0.bytes } }
    /// How many entries are stored.
    public var entryCount: Int { state.withLock { $0.count } }
}

/// A dictionary of nodes threaded on a doubly linked list, most recently used at the head.
private struct LRUList: ~Copyable {
    final class Node {
        var entry: CacheEntry
        var size: Int
        // Links never own: the dictionary is the only owner, so dropping a long list frees
        // nodes one by one instead of recursively through the chain.
        unowned(unsafe) var newer: Node?
        unowned(unsafe) var older: Node?
        init(entry: CacheEntry, size: Int) {
            self.entry = entry
            self.size = size
        }
    }

    private var nodes: [CacheKey: Node] = [:]
    private unowned(unsafe) var head: Node? // most recently used
    private unowned(unsafe) var tail: Node? // least recently used
    private(set) var bytes = 0

    var count: Int { nodes.count }

    /// The node for a key, moved to the head.
    mutating func touch(_ key: CacheKey) -> Node? {
        guard let node = nodes[key] else { return nil }
        unlink(node)
        linkAtHead(node)
        return node
    }

    mutating func insertAtFront(_ entry: CacheEntry, size: Int) {
        if let node = nodes[entry.key] {
            bytes += size - node.size
            node.entry = entry
            node.size = size
            unlink(node)
            linkAtHead(node)
            return
        }
        let node = Node(entry: entry, size: size)
        nodes[entry.key] = node
        bytes += size
        linkAtHead(node)
    }

    @discardableResult
    mutating func remove(_ key: CacheKey) -> Bool {
        guard let node = nodes[key] else { return false }
        unlink(node)
        nodes.removeValue(forKey: key)
        bytes -= node.size
        return true
    }

    mutating func removeLeastRecent() -> CacheKey? {
        guard let node = tail else { return nil }
        let key = node.entry.key
        remove(key)
        return key
    }

    /// The entry for a key, without counting a use.
    func peek(_ key: CacheKey) -> CacheEntry? { nodes[key]?.entry }

    func keys(where predicate: (CacheEntry) -> Bool) -> [CacheKey] {
        nodes.values.filter { predicate($0.entry) }.map(\.entry.key)
    }

    private mutating func linkAtHead(_ node: Node) {
        node.older = head
        node.newer = nil
        head?.newer = node
        head = node
        if tail == nil { tail = node }
    }

    private mutating func unlink(_ node: Node) {
        let older = node.older, newer = node.newer
        older?.newer = newer
        newer?.older = older
        if head === node { head = older }
        if tail === node { tail = newer }
        node.older = nil
        node.newer = nil
    }
}
