import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The file-system layer of the disk store: one open directory, and every file reached
// through it with the *at() calls, with O_NOFOLLOW, so no symbolic link is ever followed and
// no name can point outside the directory.

/// A directory the store owns, opened once and reached by descriptor.
final class StoreDirectory: Sendable {
    let fd: Int32
    let path: String
    /// This process's effective user, which owns the directory (checked when it was opened):
    /// every file read must belong to it. Kept, not asked per read (`geteuid` is a system call).
    let owner: uid_t

    /// Opens `path`, creating it (and its parents) with permissions 0700.
    /// - Throws: `HTTPCachingError.notOwned` if another user owns it, `.io` if it cannot be
    ///   created or opened, or is a symbolic link or not a directory.
    convenience init(creating path: String) throws(HTTPCachingError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw .io(operation: "mkdir", path: path, errno: errno == 0 ? EACCES : errno)
            }
        }
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open", path: path, errno: errno) }
        try self.init(adopting: fd, path: path)
    }

    /// Takes over an open directory descriptor after checking its owner (and tightening its
    /// permissions to 0700).
    init(adopting fd: Int32, path: String) throws(HTTPCachingError) {
        self.fd = fd
        self.path = path
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io(operation: "stat", path: path, errno: errno) }
        guard info.st_uid == geteuid() else { throw .notOwned(path: path, owner: info.st_uid) }
        owner = info.st_uid
        if info.st_mode & 0o777 != 0o700 { fchmod(fd, 0o700) }
    }

    deinit { closeDescriptor(fd) }

    /// A subdirectory (created 0700 if needed), refusing a symbolic link or another owner's.
    func subdirectory(_ name: String) throws(HTTPCachingError) -> StoreDirectory {
        if mkdirat(fd, name, 0o700) != 0 && errno != EEXIST {
            throw .io(operation: "mkdir", path: path + "/" + name, errno: errno)
        }
        let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard child >= 0 else { throw .io(operation: "open", path: path + "/" + name, errno: errno) }
        return try StoreDirectory(adopting: child, path: path + "/" + name)
    }

    /// Opens a file in the directory, never following a symbolic link and never blocking on
    /// a FIFO; new files get permissions 0600. A negative result leaves `errno` set.
    func open(_ name: String, _ flags: Int32, mode: mode_t = 0o600) -> Int32 {
        openat(fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
    }

    /// `open(_:_:mode:)` with the name as a C string.
    func open(_ name: UnsafePointer<CChar>, _ flags: Int32, mode: mode_t = 0o600) -> Int32 {
        openat(fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
    }

    /// Opens a regular file this user owns: anything else (a link, a FIFO, a device, another
    /// user's file) is refused with `EINVAL` (or `ELOOP` for a link).
    func openRegular(_ name: String, _ flags: Int32, mode: mode_t = 0o600) -> (fd: Int32, info: stat)? {
        let fd = open(name, flags, mode: mode)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == owner else {
            closeDescriptor(fd)
            errno = EINVAL
            return nil
        }
        return (fd, info)
    }

    /// Opens (creating if needed) a control file the store keeps open (the index, a lock,
    /// the secret): a symbolic link, FIFO or other non-file in its place is removed first.
    func openControlFile(_ name: String, _ flags: Int32) throws(HTTPCachingError) -> Int32 {
        for _ in 0..<3 {
            if let opened = openRegular(name, flags | O_CREAT) { return opened.fd }
            let code = errno
            guard code == ELOOP || code == EINVAL || code == ENXIO || code == EISDIR else {
                throw .io(operation: "open", path: path + "/" + name, errno: code)
            }
            // Not a file of ours: take the name back (unlink never follows a link).
            if unlinkat(fd, name, 0) != 0 && errno != ENOENT {
                throw .io(operation: "unlink", path: path + "/" + name, errno: errno)
            }
        }
        throw .io(operation: "open", path: path + "/" + name, errno: EINVAL)
    }

    /// The file's status without following a link; nil if it is not there.
    func status(_ name: String) -> stat? {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    @discardableResult
    func unlink(_ name: String) -> Bool {
        unlinkat(fd, name, 0) == 0
    }

    /// Removes `name` only if it is still the file `info` describes (another process may
    /// have renamed a new file into place since it was read); a directory with all it holds.
    func unlink(_ name: String, ifStill info: stat) {
        guard let now = status(name), now.st_ino == info.st_ino, now.st_dev == info.st_dev else { return }
        if (now.st_mode & S_IFMT) == S_IFDIR { return removeTree(name) }
        unlinkat(fd, name, 0)
    }

    func rename(_ from: String, to: String) -> Bool {
        renameat(fd, from, fd, to) == 0
    }

    /// Links `from` as `to`, failing (EEXIST) if `to` exists: a file appears whole or not at all.
    func link(_ from: String, to: String) -> Bool {
        linkat(fd, from, fd, to, 0) == 0
    }

    /// The names in the directory (names only: nothing is opened or read).
    func names() -> [String] {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { closeDescriptor(copy) }
            return []
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while let item = readdir(stream) {
            // d_name is read up to its NUL only: the record can be shorter than the array's
            // declared 256 bytes.
            let name = withUnsafePointer(to: &item.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes a subdirectory and everything in it, never following a link.
    func removeTree(_ name: String) {
        let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if child >= 0, let directory = try? StoreDirectory(adopting: child, path: path + "/" + name) {
            for entry in directory.names() {
                if unlinkat(directory.fd, entry, 0) != 0 && (errno == EISDIR || errno == EPERM) {
                    directory.removeTree(entry)
                }
            }
        } else if child >= 0 {
            closeDescriptor(child)
        }
        unlinkat(fd, name, AT_REMOVEDIR)
    }

    /// Writes `parts` to a new file `name` (0600, failing if it exists).
    /// - Returns: false on any failure, leaving no file behind.
    func createFile(_ name: String, _ parts: [UnsafeRawBufferPointer]) -> Bool {
        let fd = open(name, O_WRONLY | O_CREAT | O_EXCL)
        guard fd >= 0 else { return false }
        let written = writeAll(fd, parts)
        let code = errno
        closeDescriptor(fd)
        if !written {
            unlinkat(self.fd, name, 0)
            errno = code
        }
        return written
    }
}

/// A descriptor closed when the last holder lets it go, so one thread can use it while
/// another replaces it.
final class FileHandleRef: Sendable {
    let fd: Int32
    let device: UInt64
    let inode: UInt64

    init(fd: Int32) {
        self.fd = fd
        var info = stat()
        fstat(fd, &info)
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    deinit { closeDescriptor(fd) }

    /// Whether `info` describes the same file.
    func isSame(as info: stat) -> Bool {
        UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Appends with one write(2) on an O_APPEND descriptor, so concurrent writers (in any
    /// process) never interleave within it and a crash tears at most its end.
    @discardableResult
    func append(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { writeAll(fd, [$0]) }
    }

    /// The most bytes one `read(from:)` returns.
    static let readLimit = 16 << 20

    /// The bytes from `offset` to the end of the file, at most `readLimit` of them.
    func read(from offset: Int) -> [UInt8] {
        let limit = Self.readLimit
        var info = stat()
        guard fstat(fd, &info) == 0 else { return [] }
        let size = Int(clamping: info.st_size)
        guard size > offset else { return [] }
        var count = min(size - offset, limit)
        var bytes = [UInt8](repeating: 0, count: count)
        count = bytes.withUnsafeMutableBytes { buffer in
            readAll(buffer.count) { done in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done)) }
        }
        bytes.removeLast(bytes.count - count)
        return bytes
    }
}

// MARK: - System calls

// The store's own `close()` and `write(_:)` hide the C functions inside it; these reach them.
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// Writes every byte of `parts` (with writev), retrying after EINTR and partial writes.
/// - Returns: false if a write failed or wrote nothing.
func writeAll(_ fd: Int32, _ parts: [UnsafeRawBufferPointer]) -> Bool {
    var vectors = parts.filter { $0.count > 0 }.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
    var first = 0
    while first < vectors.count {
        let written = vectors.withUnsafeBufferPointer { buffer in
            writev(fd, buffer.baseAddress! + first, Int32(min(buffer.count - first, 1024)))
        }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return false }
        var remaining = written
        while first < vectors.count, remaining >= vectors[first].iov_len {
            remaining -= vectors[first].iov_len
            first += 1
        }
        if remaining > 0 {
            vectors[first].iov_base = vectors[first].iov_base! + remaining
            vectors[first].iov_len -= remaining
        }
    }
    return true
}

/// Repeats a read until `count` bytes have come or the file ends, retrying after EINTR.
/// - Parameter step: reads from `done` on; returns what read(2) returned.
/// - Returns: the bytes read, which is less than `count` at the end of the file or on error.
func readAll(_ count: Int, _ step: (_ done: Int) -> Int) -> Int {
    var done = 0
    while done < count {
        let n = step(done)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        done += n
    }
    return done
}

/// A random name part: 16 hex digits.
func randomHex() -> String {
    let value = UInt64.random(in: 0...UInt64.max)
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: 16 - hex.utf8.count) + hex
}

/// Whether a process of this host with id `pid` is certainly gone.
func processIsGone(_ pid: Int32) -> Bool {
    pid > 0 && kill(pid, 0) != 0 && errno == ESRCH
}
