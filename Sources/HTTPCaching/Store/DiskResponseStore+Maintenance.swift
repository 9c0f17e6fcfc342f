import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The shared journal and the background work: following the other processes' changes,
// recording uses, trimming to the limits and compacting the journal (reconciling it with the
// directory is in `DiskResponseStore+Reconcile.swift`). File I/O happens outside the state
// lock; the lock only guards memory.

extension DiskResponseStore {
    // MARK: - The journal

    /// Follows the journal: applies what any process appended since the last call, or reads a
    /// journal another process compacted (a new file) from its start. The keys whose entries
    /// this changed (replaced or removed by another process) go to `changeHandler`.
    func tail() {
        refreshJournal()
        let handler = changeHandler
        var changes = Changes(isWanted: handler != nil)
        defer { if !changes.isEmpty, let handler { handler(changes.everything ? nil : changes.keys) } }
        // Each turn reads at most `FileHandleRef.readLimit` bytes; a turn that lost a race
        // with another thread's tail reads again.
        for _ in 0..<1024 {
            let (journal, replayed, cursor) = state.withLock { ($0.journal, $0.replayed, $0.cursor) }
            guard let journal else { return }
            if journal !== replayed {
                let bytes = journal.read(from: 0)
                var fresh = Index()
                let replay = bytes.withUnsafeBytes { fresh.replay($0) }
                let installed = state.withLock { state -> Bool in
                    guard state.journal === journal, state.replayed === replayed, state.cursor == cursor else { return false }
                    for name in state.pendingAccesses { fresh.touch(name) }
                    changes.compare(state.index, fresh)
                    state.index = fresh
                    state.replayed = journal
                    state.cursor = replay.consumed
                    state.journalLines = replay.lines
                    return true
                }
                if installed && bytes.count < FileHandleRef.readLimit { return }
            } else {
                guard let applied = tailAppended(journal, from: cursor, &changes) else { return }
                if applied { return }
            }
        }
    }

    /// Applies the whole lines appended to the journal from `cursor`.
    /// - Returns: nil when there were none, false when another thread's tail moved the cursor
    ///   first or more bytes remain to read, true when done.
    private func tailAppended(_ journal: FileHandleRef, from cursor: Int, _ changes: inout Changes) -> Bool? {
        let bytes = journal.read(from: cursor)
        var records: [JournalRecord] = []
        var lines = 0
        let consumed = bytes.withUnsafeBytes { raw in
            Journal.forEachLine(raw) { line in
                lines += 1
                if let record = Journal.parse(line) { records.append(record) }
            }
        }
        guard consumed > 0 else { return nil }
        let applied = state.withLock { state -> Bool in
            guard state.replayed === journal, state.cursor == cursor else { return false }
            for record in records {
                changes.note(record, in: state.index)
                state.index.apply(record)
            }
            state.cursor += consumed
            state.journalLines += lines
            return true
        }
        return applied && bytes.count < FileHandleRef.readLimit
    }

    /// Switches to the journal now at `index.log` if another process replaced it.
    func refreshJournal() {
        let current = state.withLock { $0.journal }
        guard let current, !isClosed else { return }
        if let info = files.status("index.log"), current.isSame(as: info) { return }
        guard let fd = try? files.openControlFile("index.log", O_RDWR | O_APPEND) else { return }
        let journal = FileHandleRef(fd: fd)
        var info = stat()
        let empty = fstat(fd, &info) == 0 && info.st_size == 0
        state.withLock { state in
            guard state.journal === current else { return }
            state.journal = journal
            if empty { state.reconcileWanted = true } // removed behind our back: list the directory
        }
    }

    /// Appends records with as few writes as possible, each of whole lines.
    func append(_ records: [JournalRecord]) {
        guard !records.isEmpty else { return }
        refreshJournal()
        guard let journal = state.withLock({ $0.journal }) else { return }
        var chunk: [UInt8] = []
        for record in records {
            let line = Journal.line(record)
            if !chunk.isEmpty && chunk.count + line.count > 64 << 10 {
                journal.append(chunk)
                chunk.removeAll(keepingCapacity: true)
            }
            chunk += line
        }
        journal.append(chunk)
    }

    /// Appends the uses recorded in memory, in the order they happened.
    func flushAccesses() {
        let keys = state.withLock { state in
            defer { state.pendingKeyUses.removeAll() }
            return state.pendingKeyUses
        }
        if !keys.isEmpty {
            let names = keys.map(EntryName.init)
            state.withLock { state in
                for name in names where state.index.touch(name) { state.pendingAccesses.append(name) }
            }
        }
        let names = state.withLock { state -> [EntryName] in
            // Each name once, at its last use.
            var seen = Set<EntryName>()
            let names = state.pendingAccesses.reversed().filter { seen.insert($0).inserted }.reversed()
            state.pendingAccesses.removeAll(keepingCapacity: true)
            return Array(names)
        }
        append(names.map(JournalRecord.access))
    }

    // MARK: - Scheduling

    /// Runs a maintenance pass on the store's queue soon, unless one is already waiting.
    func scheduleMaintenance() {
        let start = state.withLock { state -> Bool in
            switch state.maintenance {
            case .idle: state.maintenance = .scheduled; return true
            case .running: state.maintenance = .runningAgain; return false
            case .scheduled, .runningAgain: return false
            }
        }
        guard start else { return }
        pending.enter()
        queue.async { self.runMaintenance() }
    }

    private func runMaintenance() {
        while true {
            state.withLock { $0.maintenance = .running }
            let retry = maintain()
            let next = state.withLock { state -> Int in
                if state.maintenance == .runningAgain { return 0 }
                if retry && !isClosed {
                    state.maintenance = .scheduled
                    return 1
                }
                state.maintenance = .idle
                return 2
            }
            switch next {
            case 0: continue
            case 1:
                // Another process holds the maintenance lock: it trims for everyone, and we
                // look again once it is likely done.
                queue.asyncAfter(deadline: .now() + .milliseconds(20)) { self.runMaintenance() }
                return
            default:
                pending.leave()
                return
            }
        }
    }

    /// Waits until no maintenance is pending (at most `timeout` seconds); for tests, and for
    /// the reads of totals that should honour the limits.
    /// - Returns: false on a timeout.
    @discardableResult
    package func waitForMaintenance(timeout: TimeInterval = 10) -> Bool {
        if DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(self) { return true }
        return pending.wait(timeout: .now() + timeout) == .success
    }

    /// Compacts the journal and reconciles it with the directory now (for tests, and for
    /// tools), waiting up to `timeout` seconds. - Returns: false on a timeout.
    @discardableResult
    package func compactJournal(timeout: TimeInterval = 10) -> Bool {
        state.withLock { $0.reconcileWanted = true }
        scheduleMaintenance()
        return waitForMaintenance(timeout: timeout)
    }

    /// Marks the store's queue, so a wait started there (by an eviction handler) does not
    /// wait for itself.
    static let queueKey = DispatchSpecificKey<ObjectIdentifier>()

    /// Reads what other processes changed and lets a pending trim finish.
    func settle() {
        guard !isClosed else { return }
        tail()
        waitForMaintenance(timeout: 2)
    }

    /// Waits for the trim a write past the ceiling scheduled.
    func waitForTrim() {
        state.withLock { $0.waitingWriters += 1 }
        waitForMaintenance(timeout: 2)
        state.withLock { $0.waitingWriters -= 1 }
    }

    // MARK: - A pass

    /// One pass: follow the journal, record uses, and under the maintenance lock (one process
    /// at a time) trim and compact as needed.
    /// - Returns: whether to come back because another process holds the lock.
    private func maintain() -> Bool {
        guard !isClosed else { return false }
        tail()
        flushAccesses()
        defer { deliverEvictions() }
        guard needsTrim || needsCompaction else { return false }
        guard flock(maintenanceLock.fd, LOCK_EX | LOCK_NB) == 0 else { return needsTrim }
        defer { flock(maintenanceLock.fd, LOCK_UN) }
        tail() // what the previous holder did
        trim()
        if needsCompaction { compact() }
        return false
    }

    private var needsTrim: Bool {
        state.withLock { $0.index.bytes > byteLimit || $0.index.count > countLimit }
    }

    private var needsCompaction: Bool {
        state.withLock { $0.reconcileWanted || $0.journalLines > 2 * $0.index.count + 4096 }
    }

    /// Hands the evictions of the pass to `evictionHandler`; without one (or while a write
    /// waits for them) they stay for a write to return.
    private func deliverEvictions() {
        guard let handler = evictionHandler else { return }
        let keys = state.withLock { state -> [CacheKey] in
            guard state.waitingWriters == 0 else { return [] }
            defer { state.unreportedEvictions.removeAll() }
            return state.unreportedEvictions
        }
        if !keys.isEmpty { handler(keys) }
    }

    /// The background evictions not reported yet, for a write to return: all of them when the
    /// write waited for a trim or when no `evictionHandler` takes them.
    func takeEvictions(waited: Bool) -> [CacheKey] {
        guard waited || evictionHandler == nil else { return [] }
        return state.withLock { state in
            defer { state.unreportedEvictions.removeAll() }
            return state.unreportedEvictions
        }
    }

    /// Evicts least recently used entries down to `trimRatio` of the limits, once one is
    /// passed. Sorting happens on a copy, outside the lock.
    func trim() {
        let snapshot = state.withLock { state -> [(name: EntryName, entry: IndexEntry)]? in
            guard state.index.bytes > byteLimit || state.index.count > countLimit else { return nil }
            return state.index.entries.map { (name: $0.key, entry: $0.value) }
        }
        guard let snapshot else { return }
        let byteTarget = Int(Double(byteLimit) * trimRatio), countTarget = Int(Double(countLimit) * trimRatio)
        var bytes = snapshot.reduce(0) { $0.addingReportingOverflow($1.entry.size).overflow ? Int.max : $0 + $1.entry.size }
        var count = snapshot.count
        var victims: [(name: EntryName, entry: IndexEntry)] = []
        for item in snapshot.sorted(by: { $0.entry.access < $1.entry.access }) {
            if bytes <= byteTarget && count <= countTarget { break }
            victims.append(item)
            bytes -= item.entry.size
            count -= 1
        }
        // Entries used or replaced since the copy stay.
        let evicted = state.withLock { state in
            victims.filter { victim in
                guard let now = state.index[victim.name], now.generation == victim.entry.generation,
                      now.access == victim.entry.access else { return false }
                state.index.remove(victim.name)
                return true
            }
        }
        for victim in evicted { files.unlink(victim.name.fileName) }
        append(evicted.map { JournalRecord.remove($0.name) })
        state.withLock { state in
            state.unreportedEvictions += evicted.map(\.entry.key)
            // Kept for a write to report only while nobody takes them: bounded.
            if state.unreportedEvictions.count > 10_000 { state.unreportedEvictions.removeFirst(state.unreportedEvictions.count - 10_000) }
        }
    }

    /// Rewrites the journal as one line per entry, least recently used first (temporary file,
    /// then rename), after reconciling the index with the directory. The lines other
    /// processes appended to the old journal meanwhile are copied over.
    func compact() {
        reconcile()
        sweepClaims()
        let (entries, old, oldCursor) = state.withLock { state in
            (Array(state.index.entries), state.replayed === state.journal ? state.journal : nil, state.cursor)
        }
        guard let old else { return }
        var text: [UInt8] = []
        text.reserveCapacity(entries.count * 180)
        for (name, entry) in entries.sorted(by: { $0.value.access < $1.value.access }) {
            text += Journal.line(.put(name, entry))
        }
        let temporary = "index.\(getpid()).\(randomHex()).tmp"
        guard text.withUnsafeBytes({ files.createFile(temporary, [$0]) }) else { return }
        guard files.rename(temporary, to: "index.log"),
              let fd = try? files.openControlFile("index.log", O_RDWR | O_APPEND) else {
            files.unlink(temporary)
            return
        }
        let journal = FileHandleRef(fd: fd)
        let installed = state.withLock { state -> Bool in
            guard state.journal === old, state.replayed === old, !isClosed else { return false }
            state.journal = journal
            state.replayed = journal
            state.cursor = text.count
            state.journalLines = entries.count
            state.reconcileWanted = false
            return true
        }
        guard installed else { return }
        // Whole lines appended to the old journal after our snapshot: the next tail applies them.
        let late = old.read(from: oldCursor)
        let complete = late.withUnsafeBytes { Journal.forEachLine($0) { _ in } }
        if complete > 0 { journal.append(Array(late[0..<complete])) }
    }
}
