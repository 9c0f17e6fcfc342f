import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The entry files in-place reads keep open, and the closing of descriptors off the reader's
// thread.

/// Entry files kept open after an in-place read (at most 64), so that reading a hot entry
/// again costs a status call and a read instead of an open, a status call, a read and a
/// close. A kept file is used only while its status says it is still the file under its
/// name: one link, the same change time and size (installing a new entry over it or removing
/// it, in any process, leaves it no link and a new change time). Files unused between two
/// sweeps (a second apart, while any is kept) are let go, so a file another process removed
/// holds its disk space a few seconds at most.
final class OpenEntryFiles: Sendable {
    /// An open entry file; its descriptor is closed on the closing queue when the last holder
    /// lets it go (never on the reader's thread: see `DeferredCloses`).
    final class File: Sendable {
        let fd: Int32
        let size: Int
        private let changed: (seconds: Int, nanoseconds: Int)
        private let closes: DeferredCloses

        /// Takes over `fd`, whose status is `info`.
        init(fd: Int32, info: stat, closes: DeferredCloses) {
            self.fd = fd
            size = Int(info.st_size)
            changed = (info.st_ctim.tv_sec, info.st_ctim.tv_nsec)
            self.closes = closes
        }

        deinit { closes.add(fd) }

        /// Whether the file is still the one entry file it was when opened: one link, the same
        /// change time and size (one status call, which never waits on a local disk).
        var isCurrent: Bool {
            var info = stat()
            return fstat(fd, &info) == 0 && info.st_nlink == 1 && Int(info.st_size) == size
                && info.st_ctim.tv_sec == changed.seconds && info.st_ctim.tv_nsec == changed.nanoseconds
        }
    }

    static let capacity = 64
    /// Where descriptors are closed, and sweeps run.
    let closes = DeferredCloses()
    private let slots = Mutex<(files: [EntryName: (file: File, used: Bool)], sweeping: Bool)>(([:], false))

    /// The file kept for a name, if any (marked as used).
    func file(for name: EntryName) -> File? {
        slots.withLock { slots in
            guard let slot = slots.files[name] else { return nil }
            if !slot.used { slots.files[name]?.used = true }
            return slot.file
        }
    }

    /// Keeps a file for a name, in place of any other, letting one go when full (one unused
    /// since the last sweep if there is one), and starts the sweeps.
    func keep(_ file: File, for name: EntryName) {
        let (released, startSweeping) = slots.withLock { slots -> (File?, Bool) in
            var released: File?
            if slots.files[name] == nil, slots.files.count >= Self.capacity {
                let victim = slots.files.first { !$0.value.used }?.key ?? slots.files.first!.key
                released = slots.files.removeValue(forKey: victim)?.file
            }
            slots.files[name] = (file, true)
            let start = !slots.sweeping
            slots.sweeping = true
            return (released, start)
        }
        _ = released // let go here, outside the lock
        if startSweeping { scheduleSweep() }
    }

    /// Lets go of the file kept for a name if it is still `file`.
    func drop(_ name: EntryName, ifStill file: File) {
        let released = slots.withLock { slots -> File? in
            guard slots.files[name]?.file === file else { return nil }
            return slots.files.removeValue(forKey: name)?.file
        }
        _ = released
    }

    /// Lets go of every file unused since the last sweep, and marks the others unused.
    /// - Returns: whether files are still kept.
    @discardableResult
    func sweep() -> Bool {
        let (released, remaining) = slots.withLock { slots -> ([File], Bool) in
            let unused = slots.files.filter { !$0.value.used }
            for name in unused.keys { slots.files.removeValue(forKey: name) }
            for name in slots.files.keys { slots.files[name]?.used = false }
            slots.sweeping = !slots.files.isEmpty
            return (unused.values.map(\.file), slots.sweeping)
        }
        _ = released
        return remaining
    }

    /// Lets go of every file and closes every descriptor waiting to be closed.
    func removeAll() {
        do { // the files are let go at the end of this block, before the closing
            let released = slots.withLock { slots in
                defer { slots.files.removeAll() }
                return slots.files
            }
            _ = released
        }
        closes.closeAll()
    }

    /// How many files are kept.
    var count: Int { slots.withLock { $0.files.count } }

    private func scheduleSweep() {
        closes.queue.asyncAfter(deadline: .now() + .seconds(1)) { [weak self] in
            if self?.sweep() == true { self?.scheduleSweep() }
        }
    }
}

/// Descriptors closed later on a queue of their own, never on the thread that let them go:
/// the last close of a file another process removed frees its blocks, which can wait on the
/// disk. The first of a batch schedules it 50 ms later; 64 waiting close at once.
final class DeferredCloses: Sendable {
    static let batch = 64
    let queue = DispatchQueue(label: "swift-http-caching.disk-store.closes", qos: .utility)
    private let pending = Mutex<[Int32]>([])

    /// Takes a descriptor to close.
    func add(_ fd: Int32) {
        let (first, full) = pending.withLock { pending -> (Bool, Bool) in
            pending.append(fd)
            return (pending.count == 1, pending.count >= Self.batch)
        }
        if full {
            queue.async { self.closeAll() }
        } else if first {
            queue.asyncAfter(deadline: .now() + .milliseconds(50)) { self.closeAll() }
        }
    }

    /// Closes every descriptor waiting.
    func closeAll() {
        let descriptors = pending.withLock { pending in
            defer { pending.removeAll() }
            return pending
        }
        for fd in descriptors { closeDescriptor(fd) }
    }

    /// How many wait.
    var count: Int { pending.withLock { $0.count } }
}
