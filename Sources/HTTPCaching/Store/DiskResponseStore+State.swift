import Foundation
import Synchronization

// What the disk store keeps in memory: the state under its lock, and the decoded metadata of
// recently read entries.

/// What the store keeps in memory, under its one lock (never held across file I/O).
struct State: Sendable {
    var index = Index()
    /// Uses not yet appended to the journal, oldest first (a name may repeat).
    var pendingAccesses: [EntryName] = []
    /// Uses of keys served from elsewhere (`noteUse(of:)`), not yet in the index.
    var pendingKeyUses: [CacheKey] = []
    /// Where changes are appended.
    var journal: FileHandleRef?
    /// The journal `cursor` counts into; not `journal` once another process replaced it.
    var replayed: FileHandleRef?
    /// The bytes of `replayed` applied to the index.
    var cursor = 0
    /// Lines in `replayed` (its length, for deciding to compact).
    var journalLines = 0
    var maintenance = MaintenanceStatus.idle
    /// Keys evicted by the background trim and not yet reported.
    var unreportedEvictions: [CacheKey] = []
    /// Writes waiting for a trim (they report its evictions themselves).
    var waitingWriters = 0
    /// The journal and the directory may be out of step: list the directory at the next compaction.
    var reconcileWanted = false
    /// The claims this store holds: entry name to its token.
    var claims: [EntryName: String] = [:]

    init(journal: FileHandleRef?) {
        self.journal = journal
    }
}

enum MaintenanceStatus: Sendable, Equatable {
    case idle, scheduled, running, runningAgain
}

/// The decoded metadata of recently read entries (at most 1,024), by entry name (a disk
/// store's) or key (a Redis store's). Reusing one is safe: the bytes read are still checked
/// against their checksum, which must equal the cached one.
final class MetadataCache<Name: Hashable & Sendable>: Sendable {
    private let slots = Mutex<[Name: EntryFileFormat.Metadata]>([:])
    private let capacity = 1024

    /// Checks and decodes a whole encoding (`EntryFileFormat.decode`) expecting `key`,
    /// reusing the metadata decoded before under `name` when the bytes carry the same, and
    /// keeping what it decoded anew.
    /// - Returns: the body's length (the body is the first bytes), and the metadata.
    /// - Throws: `DecodeError` for anything but a whole, intact entry of `key`.
    func decode(_ raw: UnsafeRawBufferPointer, name: Name,
                expecting key: (key: CacheKey, bytes: [UInt8])) throws(EntryFileFormat.DecodeError) -> (bodyLength: Int, metadata: EntryFileFormat.Metadata) {
        let cached = slots.withLock { $0[name] }
        let (bodyLength, metadata) = try EntryFileFormat.decode(raw, expecting: key, reusing: cached)
        if let metadata { set(name, metadata) }
        return (bodyLength, metadata ?? cached!)
    }

    private func set(_ name: Name, _ metadata: EntryFileFormat.Metadata) {
        slots.withLock { slots in
            if slots.count >= capacity, slots[name] == nil { slots.remove(at: slots.startIndex) }
            slots[name] = metadata
        }
    }
}

/// What following the journal changed: the keys of entries another process put (anew, or
/// replacing another generation) or removed, for `DiskResponseStore.changeHandler`.
struct Changes {
    private(set) var keys: [CacheKey] = []
    /// Every entry (a removal of all).
    private(set) var everything = false
    /// Whether anyone listens; nothing is noted otherwise.
    let isWanted: Bool

    var isEmpty: Bool { keys.isEmpty && !everything }

    /// Notes what applying `record` to `index` changes.
    mutating func note(_ record: JournalRecord, in index: Index) {
        guard isWanted else { return }
        switch record {
        case .put(let name, let entry): if index[name]?.generation != entry.generation { keys.append(entry.key) }
        case .remove(let name): if let old = index[name] { keys.append(old.key) }
        case .clear: everything = true
        case .access: break
        }
    }

    /// Notes what replacing `old` by `new` (a journal read again from its start) changes.
    mutating func compare(_ old: Index, _ new: Index) {
        guard isWanted else { return }
        for (name, entry) in new.entries where old[name]?.generation != entry.generation { keys.append(entry.key) }
        for (name, entry) in old.entries where new[name] == nil { keys.append(entry.key) }
    }
}
