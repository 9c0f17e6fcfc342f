import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// The system calls the disk store's in-place reads are made of, each of which fails rather
// than waits: an open that resolves the name only from the kernel's caches (openat2 with
// RESOLVE_CACHED, Linux 5.12) and a read that copies only pages already in memory (preadv2
// with RWF_NOWAIT). Glibc 2.36 has no openat2 wrapper, and Swift's Glibc module hides
// preadv2, fstatfs and O_NOATIME (they need _GNU_SOURCE): the functions are looked up by
// name once, and the constants are Linux's for x86_64 and arm64. Elsewhere, or where one of
// them is missing, nothing here is available and the store reads on its I/O queue as before.

/// Opens, reads and checks files without waiting on a disk or a lock, or fails (`EAGAIN`).
enum NonBlockingFiles {
    /// Whether this system has the calls at all (a kernel may still refuse them: `EOPNOTSUPP`,
    /// `ENOSYS`, `EINVAL`).
    static let available: Bool = calls != nil

    /// Opens `name` in `directory` for reading, only if every part of the path is in the
    /// kernel's caches (else `EAGAIN`, with nothing looked up on disk); never through a
    /// symbolic link (`ELOOP`), never updating the access time (the file must be this user's,
    /// else `EPERM`). A negative result leaves `errno` set.
    static func openCached(_ directory: Int32, _ name: UnsafePointer<CChar>) -> Int32 {
        guard let calls else {
            errno = ENOSYS
            return -1
        }
        var how = OpenHow(flags: UInt64(O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | noAccessTime),
                          mode: 0, resolve: resolveCached | resolveNoSymlinks | resolveBeneath)
        let result = withUnsafeMutablePointer(to: &how) { how in
            calls.syscall(openat2Number, Int(directory), Int(bitPattern: name), Int(bitPattern: how), MemoryLayout<OpenHow>.size)
        }
        return Int32(truncatingIfNeeded: result)
    }

    /// Reads `count` bytes from the start of `fd` into `buffer`, only from pages in memory.
    /// - Returns: the bytes read: fewer than `count` when a page is not in memory (`errno`
    ///   `EAGAIN`), the file is shorter, or the file system cannot read without waiting
    ///   (`EOPNOTSUPP`).
    static func readInMemory(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        guard let calls else {
            errno = ENOSYS
            return 0
        }
        return readAll(count) { done in
            var vector = iovec(iov_base: buffer + done, iov_len: count - done)
            return calls.preadv2(fd, &vector, 1, off_t(done), readNoWait)
        }
    }

    /// Whether the file system holding `fd` is a local disk file system whose opens and status
    /// calls never wait on anything but memory once the name is cached: ext4, XFS, Btrfs.
    /// Network and FUSE file systems answer an open from elsewhere; tmpfs refuses RWF_NOWAIT
    /// on the kernel measured (6.18); overlayfs is not trusted.
    static func isLocalDisk(_ fd: Int32) -> Bool {
        guard let calls else { return false }
        // struct statfs is 120 bytes on 64-bit Linux; f_type, a long, comes first.
        var buffer = [Int](repeating: 0, count: 32)
        guard buffer.withUnsafeMutableBytes({ calls.fstatfs(fd, $0.baseAddress!) }) == 0 else { return false }
        return [0xEF53, 0x5846_5342, 0x9123_683E].contains(buffer[0])
    }

    // MARK: - The calls

    private struct OpenHow {
        var flags: UInt64
        var mode: UInt64
        var resolve: UInt64
    }

    private typealias Syscall = @convention(c) (Int, Int, Int, Int, Int) -> Int
    private typealias PreadV2 = @convention(c) (Int32, UnsafePointer<iovec>, Int32, off_t, Int32) -> Int
    private typealias FStatFS = @convention(c) (Int32, UnsafeMutableRawPointer) -> Int32

    private struct Calls: @unchecked Sendable {
        // `syscall` is variadic in C; on x86_64 and arm64 Linux its integer arguments travel in
        // the same registers as a fixed-argument call's, and glibc's implementation is
        // assembly that reads only those registers.
        let syscall: Syscall
        let preadv2: PreadV2
        let fstatfs: FStatFS
    }

    private static let calls: Calls? = {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
        guard let syscall = dlsym(nil, "syscall"), let preadv2 = dlsym(nil, "preadv2"), let fstatfs = dlsym(nil, "fstatfs") else {
            return nil
        }
        return Calls(syscall: unsafeBitCast(syscall, to: Syscall.self), preadv2: unsafeBitCast(preadv2, to: PreadV2.self),
                     fstatfs: unsafeBitCast(fstatfs, to: FStatFS.self))
        #else
        return nil
        #endif
    }()

    private static let openat2Number = 437 // the same on every architecture
    private static let noAccessTime: Int32 = 0o1_000_000 // O_NOATIME on x86_64 and arm64
    private static let readNoWait: Int32 = 0x8 // RWF_NOWAIT
    private static let resolveNoSymlinks: UInt64 = 0x04
    private static let resolveBeneath: UInt64 = 0x08
    private static let resolveCached: UInt64 = 0x20
}
