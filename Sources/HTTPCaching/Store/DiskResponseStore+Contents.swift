import Foundation

// What the disk store holds, as a whole: listing it from the index (no entry file is read)
// and removing many entries at once.

extension DiskResponseStore {
    /// Removes every entry in the directory (including those of other processes), reporting
    /// progress as files are deleted.
    /// - Throws: nothing today; a file that cannot be removed is left for the next open.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        guard !isClosed else { return progress(RemovalProgress(removed: 0, total: 0)) }
        let names = files.names().filter { if case .entry = FileKind($0) { true } else { false } }
        state.withLock { state in
            state.index.clear()
            state.pendingAccesses.removeAll()
        }
        append([.clear])
        unlinkReporting(names, progress: progress)
    }

    /// Removes every entry whose metadata satisfies `predicate`, reporting progress as files
    /// are deleted.
    /// - Throws: nothing today; a file that cannot be removed is left for the next open.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        settle()
        let snapshot = state.withLock { Array($0.index.entries) }
        let chosen = snapshot.filter { predicate($0.value.info) } // the caller's code: outside the lock
        let removed = state.withLock { state in
            chosen.filter { name, entry in
                guard state.index[name]?.generation == entry.generation else { return false }
                state.index.remove(name)
                return true
            }.map(\.key)
        }
        append(removed.map(JournalRecord.remove))
        unlinkReporting(removed.map(\.fileName), progress: progress)
    }

    /// The metadata of every entry, from the index (no file is read).
    public func entryInfos() -> [StoredEntryInfo] {
        settle()
        return state.withLock { $0.index.entries.values.map(\.info) }
    }

    /// The bytes the entries account for (see `CacheEntry.byteCount`), once a pending trim is done.
    public var totalBytes: Int {
        settle()
        return state.withLock { $0.index.bytes }
    }

    /// How many entries are stored, once a pending trim is done.
    public var entryCount: Int {
        settle()
        return state.withLock { $0.index.count }
    }

    private func unlinkReporting(_ fileNames: [String], progress: (RemovalProgress) -> Void) {
        progress(RemovalProgress(removed: 0, total: fileNames.count))
        for (index, fileName) in fileNames.enumerated() {
            files.unlink(fileName)
            if (index + 1) % 256 == 0 || index + 1 == fileNames.count {
                progress(RemovalProgress(removed: index + 1, total: fileNames.count))
            }
        }
    }
}
