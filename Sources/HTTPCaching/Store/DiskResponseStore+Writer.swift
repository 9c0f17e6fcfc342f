import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension DiskResponseStore {
    /// A writer that puts each part of the body in a temporary file as it arrives, checksummed
    /// as it goes; commit appends the metadata and renames the file into place (a second entry
    /// for the same body, a `Vary` variant, gets a copy made by the kernel), abort removes it.
    /// Nothing holds the body in memory, unless the store has a transform, which encodes the
    /// whole body: then the parts are kept until the commit writes the entry.
    /// - Throws: `HTTPCachingError.io` if the temporary file cannot be created.
    public func makeWriter(for key: CacheKey) throws -> any ResponseStoreWriter {
        // A transform encodes the whole body: the parts wait in memory, then the entry is written.
        if transform != nil { return BufferingWriter(self) }
        let temporary = Self.temporaryName()
        let fd = files.open(temporary, O_RDWR | O_CREAT | O_EXCL)
        guard fd >= 0 else { throw HTTPCachingError.io(operation: "create", path: files.path + "/" + temporary, errno: errno) }
        return DiskEntryWriter(store: self, fd: fd, temporary: temporary)
    }
}

/// One entry being written by a disk store: its temporary file, and the body's length and
/// checksum so far.
final class DiskEntryWriter: ResponseStoreWriter, @unchecked Sendable {
    private let store: DiskResponseStore
    private let lock = NSLock()
    private var fd: Int32
    private let temporary: String
    private var checksum = BodyChecksum.Running()
    private var length = 0
    private var failed = false

    init(store: DiskResponseStore, fd: Int32, temporary: String) {
        self.store = store
        self.fd = fd
        self.temporary = temporary
    }

    deinit { abort() }

    /// Writes the part to the file. Past the store's largest file the writer stops writing
    /// and its commit stores nothing.
    /// - Throws: `HTTPCachingError.io` when the write fails.
    func append(_ bytes: Data) throws {
        try lock.withLock {
            guard fd >= 0, !failed else { return }
            guard length + bytes.count <= store.maxFileSize else {
                failed = true
                return
            }
            guard bytes.withUnsafeBytes({ writeAll(fd, [$0]) }) else {
                failed = true
                throw HTTPCachingError.io(operation: "write", path: store.files.path + "/" + temporary, errno: errno)
            }
            bytes.withUnsafeBytes { checksum.update($0) }
            length += bytes.count
        }
    }

    /// The file's bytes so far, mapped: read only as they are touched.
    var body: Data {
        get throws {
            try lock.withLock {
                guard length > 0 else { return Data() }
                return try Data(contentsOf: URL(fileURLWithPath: store.files.path + "/" + temporary), options: .alwaysMapped)
            }
        }
    }

    /// Appends each entry's metadata to a file holding the body and renames it into place.
    /// - Throws: `HTTPCachingError.io` when a write, copy or rename fails.
    func commit(_ entries: [CacheEntry]) throws -> StoreWriteResult {
        try lock.withLock {
            defer { closeAndRemove() }
            guard fd >= 0 else { return StoreWriteResult(stored: false) }
            var result = StoreWriteResult(stored: true)
            for (index, entry) in entries.enumerated() {
                let written = try commit(entry, copy: index < entries.count - 1)
                result.stored = result.stored && written.stored
                result.evicted += written.evicted
            }
            return result
        }
    }

    /// Stores one entry with the body: from a copy of the file when other entries still need
    /// it, else from the file itself.
    private func commit(_ entry: CacheEntry, copy: Bool) throws -> StoreWriteResult {
        var sized = entry
        sized.body = Data()
        let size = sized.byteCount + length
        let name = EntryName(entry.key)
        guard !failed, size <= store.maxEntrySize, size <= store.byteLimit, store.countLimit > 0 else {
            try store.removeEntry(for: entry.key)
            return StoreWriteResult(stored: false)
        }
        let tail = EntryFileFormat.encodeTail(entry, bodyLength: length, bodyChecksum: checksum.finish())
        let file = copy ? try copyOfBody() : (fd: fd, name: temporary)
        defer { if copy { closeDescriptor(file.fd) } }
        guard tail.withUnsafeBytes({ writeAll(file.fd, [$0]) }) else {
            let code = errno
            store.files.unlink(file.name)
            throw HTTPCachingError.io(operation: "write", path: store.files.path + "/" + file.name, errno: code)
        }
        var record = IndexEntry(sized)
        record.size = size
        return try store.install(file.name, as: name, record)
    }

    /// A new temporary file holding the body written so far, copied by the kernel.
    private func copyOfBody() throws -> (fd: Int32, name: String) {
        let name = DiskResponseStore.temporaryName()
        let copy = store.files.open(name, O_WRONLY | O_CREAT | O_EXCL)
        guard copy >= 0 else { throw HTTPCachingError.io(operation: "create", path: store.files.path + "/" + name, errno: errno) }
        var offset: off_t = 0
        while offset < off_t(length) {
            let copied = sendfile(copy, fd, &offset, length - Int(offset))
            if copied < 0 && errno == EINTR { continue }
            guard copied > 0 else {
                let code = errno
                closeDescriptor(copy)
                store.files.unlink(name)
                throw HTTPCachingError.io(operation: "copy", path: store.files.path + "/" + name, errno: code)
            }
        }
        return (copy, name)
    }

    /// Removes the file and ends the writer.
    func abort() {
        lock.withLock { closeAndRemove() }
    }

    private func closeAndRemove() {
        guard fd >= 0 else { return }
        closeDescriptor(fd)
        fd = -1
        store.files.unlink(temporary) // gone already after a commit renamed it
    }
}
