import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// What several processes share besides entries: refresh claims, the partition secret, and
// the private folders of per-session stores.

extension DiskResponseStore {
    // MARK: - Refresh claims

    /// Claims the background refresh of a key for `lease` seconds across every process that
    /// shares the directory: a file `claims/<name>` holds the claim's expiry and a token. A
    /// claim whose lease has run out (its holder crashed) is taken over. Claims are checked
    /// and written under a lock file (`claims.lock`, held for a few file operations), so two
    /// claimers never both win.
    /// - Returns: false if another holder, in this process or another, has a live claim.
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool {
        claim(key, lease: lease) == .won
    }

    /// `claimRefresh(of:lease:)`, saying whether a refusal is another holder's live claim or a
    /// claim that could not be recorded (the lock or the claim file could not be made).
    func claim(_ key: CacheKey, lease: TimeInterval) -> ClaimOutcome {
        guard !isClosed else { return .failed }
        let name = EntryName(key)
        let token = randomHex() + randomHex()
        let milliseconds = lease.isFinite ? Int64(min(max(lease, 0), 86_400) * 1000) : 0
        guard let lock = lockClaims() else { return .failed }
        defer { closeDescriptor(lock) } // releases the lock
        let now = Self.wallClockMilliseconds()
        if let claim = readClaim(name.hex), claim.expiry > now { return .heldElsewhere }
        let text = Array("\(now + milliseconds) \(token)\n".utf8)
        let temporary = "\(name.hex).\(getpid()).\(randomHex()).tmp"
        guard text.withUnsafeBytes({ claimsFolder.createFile(temporary, [$0]) }) else { return .failed }
        guard claimsFolder.rename(temporary, to: name.hex) else {
            claimsFolder.unlink(temporary)
            return .failed
        }
        state.withLock { $0.claims[name] = token }
        return .won
    }

    /// Gives back a claim this store holds (a claim taken over since is left alone).
    public func releaseRefresh(of key: CacheKey) {
        let name = EntryName(key)
        guard let token = state.withLock({ $0.claims.removeValue(forKey: name) }) else { return }
        guard let lock = lockClaims() else { return }
        defer { closeDescriptor(lock) }
        if readClaim(name.hex)?.token == token { claimsFolder.unlink(name.hex) }
    }

    /// Removes claims that ran out more than a minute ago and abandoned temporary files.
    func sweepClaims() {
        guard let lock = lockClaims() else { return }
        defer { closeDescriptor(lock) }
        let now = Self.wallClockMilliseconds()
        for fileName in claimsFolder.names() {
            if fileName.hasSuffix(".tmp") {
                removeIfAbandoned(fileName, in: claimsFolder)
            } else if EntryName(hex: fileName.utf8) != nil, let claim = readClaim(fileName), claim.expiry < now - 60_000 {
                claimsFolder.unlink(fileName)
            }
        }
    }

    /// A fresh descriptor of `claims.lock`, locked; nil if the lock stays busy for 50 ms. (A
    /// descriptor of its own per claim, so threads of one process exclude each other too.)
    private func lockClaims() -> Int32? {
        guard let fd = try? files.openControlFile("claims.lock", O_RDWR) else { return nil }
        let deadline = DispatchTime.now().uptimeNanoseconds + 50_000_000
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, DispatchTime.now().uptimeNanoseconds < deadline else {
                closeDescriptor(fd)
                return nil
            }
            sched_yield()
        }
        return fd
    }

    /// A claim file's expiry (milliseconds since 1970) and token; nil if absent or unreadable.
    private func readClaim(_ fileName: String) -> (expiry: Int64, token: String)? {
        guard let (fd, info) = claimsFolder.openRegular(fileName, O_RDONLY) else { return nil }
        defer { closeDescriptor(fd) }
        guard info.st_size > 0, info.st_size <= 128 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let count = bytes.withUnsafeMutableBytes { buffer in
            readAll(buffer.count) { done in pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(done)) }
        }
        let fields = bytes[0..<count].split(separator: UInt8(ascii: " "))
        guard fields.count == 2, fields[1].last == UInt8(ascii: "\n"),
              let expiry = Journal.decimal(fields[0], max: Int(Int64.max / 2)) else { return nil }
        return (Int64(expiry), String(decoding: fields[1].dropLast(), as: UTF8.self))
    }

    static func wallClockMilliseconds() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }

    // MARK: - The partition secret

    /// The 32 bytes of `secret`, created if absent: written to a temporary file and linked
    /// into place, so processes opening a new directory at once all end up with the winner's.
    /// A damaged secret (wrong size, not a file) is replaced.
    static func loadSecret(_ folder: StoreDirectory) throws(HTTPCachingError) -> [UInt8] {
        for _ in 0..<8 {
            if let (fd, info) = folder.openRegular("secret", O_RDONLY) {
                var bytes = [UInt8](repeating: 0, count: 32)
                let count = info.st_size == 32 ? bytes.withUnsafeMutableBytes { buffer in
                    readAll(32) { done in pread(fd, buffer.baseAddress! + done, 32 - done, off_t(done)) }
                } : 0
                closeDescriptor(fd)
                if count == 32 { return bytes }
                folder.unlink("secret", ifStill: info) // damaged: replaced below
            } else if errno != ENOENT {
                folder.unlink("secret") // a link, a FIFO or another user's file: never read
            }
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let temporary = "secret.\(getpid()).\(randomHex()).tmp"
            guard bytes.withUnsafeBytes({ folder.createFile(temporary, [$0]) }) else {
                throw .io(operation: "write", path: folder.path + "/" + temporary, errno: errno)
            }
            let linked = folder.link(temporary, to: "secret")
            let code = errno
            folder.unlink(temporary)
            if linked { return bytes }
            guard code == EEXIST else { throw .io(operation: "link", path: folder.path + "/secret", errno: code) }
            // Another process linked its secret first: read it on the next turn.
        }
        throw .io(operation: "create", path: folder.path + "/secret", errno: EAGAIN)
    }
}

/// A per-session store's own folder, `sessions/s-<random>`, with a lock file its store holds
/// for as long as it is open: a folder whose lock can be taken belongs to a store that closed
/// or crashed, and the next store to open the directory removes it.
final class StoreSession: Sendable {
    let sessions: StoreDirectory
    let name: String
    let folder: StoreDirectory
    private let lock: FileHandleRef

    /// Creates the folder under a temporary name, locks it, then renames it into place, so a
    /// sweeping store never sees it unlocked.
    init(in base: StoreDirectory) throws(HTTPCachingError) {
        sessions = try base.subdirectory("sessions")
        let suffix = randomHex()
        let folder = try sessions.subdirectory("t-" + suffix)
        let lockFD = try folder.openControlFile("session.lock", O_RDWR)
        lock = FileHandleRef(fd: lockFD)
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0,
              sessions.rename("t-" + suffix, to: "s-" + suffix) else {
            let code = errno
            sessions.removeTree("t-" + suffix)
            throw .io(operation: "lock", path: sessions.path + "/t-" + suffix, errno: code)
        }
        name = "s-" + suffix
        self.folder = try StoreDirectory(adopting: dup(folder.fd), path: sessions.path + "/" + name)
    }

    /// Removes the folder and everything in it.
    func remove() {
        sessions.removeTree(name)
    }

    /// Removes the folders of sessions that ended without removing them (a crash).
    static func sweep(_ base: StoreDirectory) {
        guard base.status("sessions") != nil, let sessions = try? base.subdirectory("sessions") else { return }
        for name in sessions.names() {
            if name.hasPrefix("s-"), let folder = try? sessions.subdirectory(name) {
                var abandoned = true
                if let (fd, _) = folder.openRegular("session.lock", O_RDWR) {
                    abandoned = flock(fd, LOCK_EX | LOCK_NB) == 0
                    closeDescriptor(fd)
                }
                if abandoned { sessions.removeTree(name) }
            } else if name.hasPrefix("t-"), let info = sessions.status(name), time(nil) - info.st_mtim.tv_sec > 60 {
                sessions.removeTree(name) // its store died while creating it
            }
        }
    }
}

extension DiskResponseStore: ReportingClaims {}
