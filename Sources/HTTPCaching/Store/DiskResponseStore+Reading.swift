import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Reading an entry file: on the I/O queue (`entry(for:)`, which may wait on the disk and
// removes what it finds damaged), or in place on the caller's thread (`immediateEntry(for:)`,
// which never waits and changes nothing on disk: anything short of a whole, intact entry in
// memory is left to the I/O queue's read).
extension DiskResponseStore {
    /// The largest entry file read in place: a larger one costs more to copy and check than
    /// the move to the I/O queue saves, and would hold Foundation's queue while it does.
    static let inPlaceReadLimit = 1 << 20

    /// Why an entry file's bytes gave no entry, before anything is decided about the file.
    enum FileReadFailure: Error {
        /// Fewer bytes came than the file holds (read in place: not all of it is in memory).
        case short
        case noMemory
        case decode(EntryFileFormat.DecodeError)
    }

    /// The entry for a key if its file can be read without waiting on the disk: the name in
    /// the kernel's caches (or the file kept open from an earlier read) and every byte in the
    /// page cache (Linux 5.12 or later, on ext4, XFS or Btrfs, no transform). Counts as a use.
    ///
    /// The cache calls this on Foundation's shared URLSession queue: the one exception to "no
    /// I/O there", made so a page-cached disk hit costs what a memory hit does. What it runs
    /// there: `fstat` of a kept descriptor (the in-memory inode), or else one `openat2` that
    /// resolves the name only from the dentry cache (`RESOLVE_CACHED`: `EAGAIN` instead of
    /// reading a directory block; never through a link; `O_NOATIME`, so no inode is dirtied)
    /// and an `fstat`; then one `preadv2(RWF_NOWAIT)`, which copies pages already in memory
    /// and fails with `EAGAIN` rather than wait for one that is not; then the
    /// checksums and decoding (CPU, at most `inPlaceReadLimit` bytes). It never closes a
    /// descriptor (the last close of a removed file frees its blocks: done on a queue of its
    /// own), writes nothing to disk (the use goes to the journal with the next batch, on the
    /// maintenance queue) and removes nothing. The kernel may still take its own short
    /// in-memory locks, and the copy may fault in the fresh buffer as any allocation can.
    ///
    /// `.absent` when the kernel knows the file is not there (a cached negative entry);
    /// `.needsIO` for anything else (a name or a page not in memory, a damaged file, a link, a
    /// file over `inPlaceReadLimit`, a store with a transform, another file system), which
    /// `entry(for:)` then reads on the I/O queue, removing and reporting what is damaged.
    public func immediateEntry(for key: CacheKey) -> ImmediateLookup {
        guard inPlaceReads.load(ordering: .relaxed) else { return .needsIO } // never with a transform
        guard !isClosed else { return .absent }
        let keyBytes = EntryName.storageBytes(of: key)
        let name = EntryName(storageBytes: keyBytes)
        let file: OpenEntryFiles.File
        let kept = openFiles.file(for: name)
        if let kept, kept.isCurrent {
            file = kept
        } else {
            // Replaced or removed since it was kept: let go now, not at a sweep a lookup that
            // keeps finding it would put off (it holds a removed file's space).
            if let kept { openFiles.drop(name, ifStill: kept) }
            switch openInPlace(name) {
            case .opened(let opened): file = opened
            case .answered(let answer): return answer
            }
        }
        var code: Int32 = 0
        do throws(FileReadFailure) {
            let entry = try decodeFile(size: file.size, name, expecting: (key, keyBytes)) { buffer, count in
                let read = NonBlockingFiles.readInMemory(file.fd, into: buffer, count: count)
                if read < count { code = errno }
                return read
            }
            guard let entry else { return .absent } // another key's or another transform's entry
            recordRead(of: name, entry)
            return .found(entry)
        } catch {
            if code == EOPNOTSUPP || code == ENOSYS { // this file system cannot read without waiting
                inPlaceReads.store(false, ordering: .relaxed)
                openFiles.removeAll()
            } else if code != EAGAIN {
                openFiles.drop(name, ifStill: file) // damaged or changed: entry(for:) will see
            }
            return .needsIO
        }
    }

    /// What opening an entry file in place gave.
    private enum InPlaceOpen {
        case opened(OpenEntryFiles.File)
        case answered(ImmediateLookup)
    }

    /// Opens an entry file without waiting and keeps it open for the next reads, if it is a
    /// regular file of this user with one link and no larger than `inPlaceReadLimit`.
    private func openInPlace(_ name: EntryName) -> InPlaceOpen {
        let fd = name.withFileName { NonBlockingFiles.openCached(files.fd, $0) }
        guard fd >= 0 else { return .answered(inPlaceOpenFailed(errno, name)) }
        var info = stat()
        let status = fstat(fd, &info)
        let file = OpenEntryFiles.File(fd: fd, info: info, closes: openFiles.closes) // closes it when let go
        guard status == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == files.owner, info.st_nlink == 1,
              info.st_size <= Self.inPlaceReadLimit, info.st_size <= maxFileSize else { return .answered(.needsIO) }
        openFiles.keep(file, for: name)
        return .opened(file)
    }

    /// What an in-place open's failure says: `.absent` when the kernel knows the name is not
    /// there, `.needsIO` otherwise (not cached, a link, an error), and no more in-place reads
    /// where the kernel has no such open.
    private func inPlaceOpenFailed(_ code: Int32, _ name: EntryName) -> ImmediateLookup {
        switch code {
        case ENOENT:
            state.withLock { _ = $0.index.remove(name) } // removed by another process
            return .absent
        case ENOSYS, EINVAL, E2BIG:
            inPlaceReads.store(false, ordering: .relaxed)
            return .needsIO
        default:
            return .needsIO
        }
    }

    /// Reads and decodes the whole entry file `info` describes; nil for a miss (another key's
    /// entry, or an older release's, which is removed). A damaged file is removed and reported.
    func readEntry(_ fd: Int32, info: stat, _ name: EntryName,
                   expecting key: (key: CacheKey, bytes: [UInt8])) throws -> CacheEntry? {
        let decodeError: EntryFileFormat.DecodeError
        do throws(FileReadFailure) {
            return try decodeFile(size: Int(info.st_size), name, expecting: key) { buffer, count in
                readAll(count) { done in Glibc.read(fd, buffer + done, count - done) }
            }
        } catch .noMemory {
            throw HTTPCachingError.io(operation: "read", path: files.path + "/" + name.fileName, errno: ENOMEM)
        } catch .short {
            decodeError = .truncated
        } catch .decode(let error) {
            decodeError = error
        }
        switch decodeError {
        case .transformFailed(let reason):
            throw HTTPCachingError.unavailable(reason: reason) // a store failure: the entry stays
        case .unsupportedVersion:
            files.unlink(name.fileName, ifStill: info) // an older release's entry: a miss
            forget(name)
            return nil
        default:
            files.unlink(name.fileName, ifStill: info)
            throw removedAsCorrupt(name, key.key, reason: decodeError.description)
        }
    }

    /// Reads `size` bytes with `read` (given a buffer and a count, returning the bytes read)
    /// and decodes them, changing nothing on disk and reporting nothing.
    /// - Returns: the entry, or nil for another key's entry or another transform's (misses).
    private func decodeFile(size: Int, _ name: EntryName, expecting key: (key: CacheKey, bytes: [UInt8]),
                            read: (UnsafeMutableRawPointer, Int) -> Int) throws(FileReadFailure) -> CacheEntry? {
        guard let buffer = malloc(max(size, 1)) else { throw .noMemory }
        var owned = true // until a Data takes the buffer
        defer { if owned { free(buffer) } }
        guard read(buffer, size) == size else { throw .short }
        do throws(EntryFileFormat.DecodeError) {
            let (bodyLength, decoded) = try decodedMetadata.decode(UnsafeRawBufferPointer(start: buffer, count: size),
                                                                   name: name, expecting: key)
            guard decoded.transform == transform?.name else { return nil } // another transform's entry: a miss
            var entry = decoded.entry
            entry.key = key.key
            // The body is the first bytes of the buffer: handed out without a copy.
            entry.body = Data(bytesNoCopy: buffer, count: bodyLength, deallocator: .free)
            owned = false
            if let transform { entry.body = try decodeBody(entry.body, transform, name) }
            return entry
        } catch .keyMismatch {
            return nil // another key's entry: a miss, and its file stays
        } catch {
            throw .decode(error)
        }
    }

    /// A body decoded by the store's transform; its failure is the read's (never a wrong body).
    private func decodeBody(_ stored: Data, _ transform: any StoreTransform, _ name: EntryName) throws(EntryFileFormat.DecodeError) -> Data {
        do {
            return try transform.decode(stored)
        } catch {
            throw .transformFailed("\(transform.name): \(error)")
        }
    }
}
