import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
@testable import HTTPCaching

/// Whether the disk store can read in place where the tests keep their stores (a local disk
/// file system: the temporary directory is on ext4 on the machines this package is built on).
let inPlaceReadsWork: Bool = {
    let fd = open(FileManager.default.temporaryDirectory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { if fd >= 0 { close(fd) } }
    return fd >= 0 && NonBlockingFiles.isLocalDisk(fd)
}()

/// Drops an entry file's bytes from the page cache (written to disk first, so they can be
/// dropped), so the next read of them has to wait for the disk.
/// - Returns: false if the file could not be opened, synced or advised.
func evictFromPageCache(_ directory: TemporaryDirectory, _ key: CacheKey) -> Bool {
    let fd = open(directory.path + "/" + DiskResponseStore.fileName(for: key) + ".entry", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0
}

/// A store that forwards to another and records, in order, what each in-place lookup answered
/// and each read, with whether the read ran on one of the cache's I/O queues. Reads can be held
/// at a gate (after reading), as a slow disk would hold them.
final class PathRecordingStore: ResponseStore {
    /// What an in-place lookup answered.
    enum Answer: Equatable, Sendable { case found, absent, needsIO }

    /// One call the cache made.
    enum Call: Equatable, Sendable {
        case inPlace(Answer)
        case read(onIOQueue: Bool)
    }

    let inner: any ResponseStore
    private let state = Mutex<(calls: [(url: String, call: Call)], gate: ReadGate?)>(([], nil))
    private let onIOQueue = Mutex<(@Sendable () -> Bool)?>(nil)

    init(_ inner: any ResponseStore) {
        self.inner = inner
    }

    /// Tells reads apart by whether they run on `engine`'s I/O queues.
    func watch(_ engine: CacheEngine) {
        onIOQueue.withLock { $0 = { [weak engine] in engine?.isOnIOQueue ?? false } }
    }

    /// Holds every later read at `gate`.
    func hold(at gate: ReadGate) {
        state.withLock { $0.gate = gate }
    }

    /// The calls made for a URL, oldest first.
    func calls(for url: String) -> [Call] {
        state.withLock { $0.calls.filter { $0.url == url }.map(\.call) }
    }

    private func record(_ url: String, _ call: Call) -> ReadGate? {
        state.withLock { state in
            state.calls.append((url, call))
            return state.gate
        }
    }

    func immediateEntry(for key: CacheKey) -> ImmediateLookup {
        let answer = inner.immediateEntry(for: key)
        let kind: Answer = switch answer {
        case .found: .found
        case .absent: .absent
        case .needsIO: .needsIO
        }
        _ = record(key.url, .inPlace(kind))
        return answer
    }

    func entry(for key: CacheKey) throws -> CacheEntry? {
        let entry = try inner.entry(for: key)
        let ioQueue = onIOQueue.withLock { $0 }?() ?? false
        record(key.url, .read(onIOQueue: ioQueue))?.hold()
        return entry
    }

    @discardableResult
    func write(_ entry: CacheEntry) throws -> StoreWriteResult { try inner.write(entry) }
    func removeEntry(for key: CacheKey) throws { try inner.removeEntry(for: key) }
    func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        try inner.removeEntries(where: predicate, progress: progress)
    }
    func entryInfos() throws -> [StoredEntryInfo] { try inner.entryInfos() }
    func partitionSecret() throws -> [UInt8] { try inner.partitionSecret() }
    var maxEntrySize: Int { inner.maxEntrySize }
}

/// Runs an action after some seconds unless cancelled first, so that a test which would hang
/// on a regression (a hit waiting behind something held) fails instead.
final class Watchdog: Sendable {
    private let state = Mutex<(cancelled: Bool, fired: Bool)>((false, false))

    init(after seconds: Double, _ action: @escaping @Sendable () -> Void) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            let fire = state.withLock { state -> Bool in
                guard !state.cancelled else { return false }
                state.fired = true
                return true
            }
            if fire { action() }
        }
    }

    /// Whether it has fired.
    var fired: Bool { state.withLock { $0.fired } }

    /// Stops it. - Returns: true if it had not fired.
    func cancel() -> Bool {
        state.withLock { state in
            state.cancelled = true
            return !state.fired
        }
    }
}

/// Holds a serial queue (a block waits on it) until released, or until a watchdog lets it go
/// after 20 seconds.
final class QueueHold: Sendable {
    private let gate = DispatchSemaphore(value: 0)
    private let watchdog: Watchdog

    init(_ queue: DispatchQueue) {
        let gate = gate
        queue.async { gate.wait() }
        watchdog = Watchdog(after: 20) { gate.signal() }
    }

    /// Whether the queue is still held by this (the watchdog has not let it go).
    var isHeld: Bool { !watchdog.fired }

    /// Lets the queue go. - Returns: true if it was still held (the watchdog had not fired).
    func release() -> Bool {
        let held = watchdog.cancel()
        if held { gate.signal() }
        return held
    }
}

/// A completion-handler data task, awaited, with `note` evaluated in its completion handler:
/// what held when the answer came, however late the awaiting task resumes.
func fetch(_ session: URLSession, _ url: URL, noting note: @escaping @Sendable () -> Bool) async throws -> (FetchResult, Bool) {
    try await withCheckedThrowingContinuation { continuation in
        session.dataTask(with: url) { data, response, error in
            let noted = note()
            if let error {
                continuation.resume(throwing: error)
            } else if let http = response as? HTTPURLResponse {
                continuation.resume(returning: (FetchResult(data: data ?? Data(), response: http), noted))
            } else {
                continuation.resume(throwing: URLError(.badServerResponse))
            }
        }.resume()
    }
}
