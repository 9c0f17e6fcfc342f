import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a Redis call got no reply: the server could not be reached, did not answer in time,
/// closed the connection, sent bytes that are not RESP, or refused the credentials.
struct RedisClientError: Error, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        /// No connection: the name did not resolve, the connection was refused or timed out,
        /// or a recent failure is still being waited out (`RedisConfiguration.retryDelay`).
        case connect
        /// `AUTH` or `SELECT` was refused.
        case handshake
        /// No reply (or no free connection) within the timeout.
        case timeout
        /// The server closed the connection, or a socket call failed.
        case closed
        /// Bytes that are not a RESP2 reply.
        case protocolViolation
        /// A well-formed reply over the parser's limits (a value too large to take).
        case replyTooLarge
        /// A Redis Cluster could not route the command: no node told the topology, no primary
        /// serves the key's slot, or the redirections did not end.
        case cluster
        /// No sentinel named the primary: none answered, or none knows the master name.
        case sentinel
        /// The node a sentinel named says it is a replica (`ROLE`), or refused a write as one
        /// (`-READONLY`): a failover is under way or was missed.
        case replica
    }

    let kind: Kind
    /// What happened, in a sentence; never a password.
    let description: String
    /// The connection closed before a byte of any reply came back (`closed` only).
    var beforeAnyReply = false

    init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }
}

/// One TCP connection to a Redis server, speaking RESP2, over TLS when the store's
/// configuration asks for it (`RedisTLSSession`).
///
/// Not thread-safe: the pool hands a connection to one caller at a time (hence
/// `@unchecked Sendable`). Any failure during a call (a timeout, a closed socket, a reply that
/// is not RESP) closes the connection for good, so a reply half read is never taken as the
/// answer to a later command.
final class RedisConnection: @unchecked Sendable {
    private var fd: Int32
    private var tls: RedisTLSSession?
    private var parser: RESPParser
    private var scratch = [UInt8](repeating: 0, count: 64 << 10)

    /// Whether a call failed; a broken connection is closed and never used again.
    private(set) var isBroken = false

    private init(fd: Int32, limits: RESPParser.Limits) {
        self.fd = fd
        self.parser = RESPParser(limits: limits)
    }

    deinit { close() }

    /// Opens a connection (with a TLS handshake when `tls` is given), then authenticates and
    /// selects the database as configured.
    /// - Throws: `RedisClientError` of kind `.connect` (or `.timeout`) when there is no
    ///   connection within `connectTimeout` (a TLS handshake that fails included),
    ///   `.handshake` when `AUTH` or `SELECT` is refused.
    static func open(_ configuration: RedisConfiguration, limits: RESPParser.Limits,
                     tls: RedisTLSContext?) throws(RedisClientError) -> RedisConnection {
        let deadline = Deadline(after: configuration.connectTimeout)
        let fd = try connectSocket(host: configuration.host, port: configuration.port, deadline: deadline)
        let connection = RedisConnection(fd: fd, limits: limits)
        if let tls {
            do throws(RedisClientError) {
                connection.tls = try RedisTLSSession(context: tls, fd: fd, host: configuration.host, port: configuration.port,
                                                     deadline: deadline)
            } catch {
                connection.close()
                throw error
            }
        }
        var handshake: [RedisCommand] = []
        if let password = configuration.password {
            handshake.append(configuration.username.map { RedisCommand("AUTH", $0, password) } ?? RedisCommand("AUTH", password))
        }
        if configuration.database != 0 { handshake.append(RedisCommand("SELECT", configuration.database)) }
        guard !handshake.isEmpty else { return connection }
        let replies = try connection.execute(handshake, deadline: deadline)
        for (command, reply) in zip(handshake, replies) where !reply.isOK {
            connection.close()
            let message = reply.errorMessage ?? "an unexpected reply"
            if command.name == "AUTH" {
                let user = configuration.username.map { "as user '\($0)'" } ?? "with a password"
                throw RedisClientError(.handshake, "Redis at \(configuration.host):\(configuration.port) refused to authenticate \(user): \(message)")
            }
            throw RedisClientError(.handshake, "Redis at \(configuration.host):\(configuration.port) refused SELECT \(configuration.database): \(message)")
        }
        return connection
    }

    /// Sends the commands at once (pipelined) and reads one reply for each, in order. Error
    /// replies are returned, not thrown: the connection stays usable after them.
    /// - Throws: `RedisClientError` when the replies do not all arrive within `timeout`, the
    ///   connection closes, or the bytes are not RESP; the connection is then closed.
    func execute(_ commands: [RedisCommand], timeout: TimeInterval) throws(RedisClientError) -> [RESPValue] {
        try execute(commands, deadline: Deadline(after: timeout))
    }

    private func execute(_ commands: [RedisCommand], deadline: Deadline) throws(RedisClientError) -> [RESPValue] {
        guard !isBroken else { throw RedisClientError(.closed, "the connection was closed after an earlier failure") }
        var replies: [RESPValue] = []
        do throws(RedisClientError) {
            var out: [UInt8] = []
            out.reserveCapacity(commands.reduce(0) { $0 + $1.arguments.reduce(16) { $0 + $1.count + 16 } })
            for command in commands { command.encode(into: &out) }
            let what = commands.count == 1 ? commands[0].name : "\(commands.count) pipelined commands"
            try send(out, deadline: deadline, what: what)
            replies.reserveCapacity(commands.count)
            while replies.count < commands.count {
                if let reply = try parsed() { replies.append(reply) } else { try receive(deadline: deadline, what: what) }
            }
            return replies
        } catch {
            var error = error
            error.beforeAnyReply = error.kind == .closed && replies.isEmpty && parser.bufferedByteCount == 0
            close()
            throw error
        }
    }

    /// The next whole reply the parser holds, or nil until more bytes arrive.
    private func parsed() throws(RedisClientError) -> RESPValue? {
        do {
            return try parser.next()
        } catch {
            throw error.isOverLimit
                ? RedisClientError(.replyTooLarge, "Redis sent a reply too large to take: \(error.description)")
                : RedisClientError(.protocolViolation, "Redis sent a reply that is not RESP2: \(error.description)")
        }
    }

    /// Sends commands without reading their replies (on a subscribed connection, whose
    /// replies and messages `read(within:)` takes as they come).
    /// - Throws: `RedisClientError` when they cannot be sent within `timeout`; the connection
    ///   is then closed.
    func send(_ commands: [RedisCommand], timeout: TimeInterval) throws(RedisClientError) {
        guard !isBroken else { throw RedisClientError(.closed, "the connection was closed after an earlier failure") }
        var out: [UInt8] = []
        for command in commands { command.encode(into: &out) }
        do throws(RedisClientError) {
            try send(out, deadline: Deadline(after: timeout), what: commands.first?.name ?? "nothing")
        } catch {
            close()
            throw error
        }
    }

    /// The next reply or message, waiting at most `timeout` for bytes; nil when none (or only
    /// part of one) arrived in time.
    /// - Throws: `RedisClientError` when the connection closes or the bytes are not RESP; the
    ///   connection is then closed.
    func read(within timeout: TimeInterval) throws(RedisClientError) -> RESPValue? {
        guard !isBroken else { throw RedisClientError(.closed, "the connection was closed after an earlier failure") }
        do throws(RedisClientError) {
            if let value = try parsed() { return value }
            do {
                try receive(deadline: Deadline(after: timeout), what: "a message")
            } catch where error.kind == .timeout {
                return nil
            }
            return try parsed()
        } catch {
            close()
            throw error
        }
    }

    /// Whether an idle connection can take a command: nothing unread is waiting and the server
    /// has not closed it (a restarted server closes every connection it had).
    var isUsableWhenIdle: Bool {
        guard !isBroken, parser.bufferedByteCount == 0, tls?.hasPendingInput != true else { return false }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// Closes the socket; later calls fail.
    func close() {
        isBroken = true
        tls?.shutdown()
        tls = nil
        if fd >= 0 {
            _ = systemClose(fd)
            fd = -1
        }
    }

    // MARK: - Socket

    private func send(_ bytes: [UInt8], deadline: Deadline, what: String) throws(RedisClientError) {
        if let tls {
            try tls.write(bytes, deadline: deadline, what: what)
            return
        }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                systemSend(fd, buffer.baseAddress! + offset, buffer.count - offset, sendFlags)
            }
            if sent > 0 {
                offset += sent
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                try wait(for: Int16(POLLOUT), deadline: deadline, what: "sending \(what)")
            } else if sent < 0 && errno == EINTR {
                continue
            } else {
                throw RedisClientError(.closed, "sending \(what) to Redis failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    private func receive(deadline: Deadline, what: String) throws(RedisClientError) {
        if let tls {
            // OpenSSL may hold bytes already read: ask it first, it waits only when it has none.
            let count = try tls.read(into: &scratch, deadline: deadline, what: "the reply to \(what)")
            scratch.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
            return
        }
        while true {
            // Wait first: right after a send, a reply is almost never there yet, and a recv
            // that finds nothing would cost a system call.
            try wait(for: Int16(POLLIN), deadline: deadline, what: "the reply to \(what)")
            let count = scratch.withUnsafeMutableBytes { buffer in recv(fd, buffer.baseAddress!, buffer.count, 0) }
            if count > 0 {
                scratch.withUnsafeBytes { parser.append(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
                return
            }
            if count == 0 { throw RedisClientError(.closed, "Redis closed the connection before answering \(what)") }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else {
                throw RedisClientError(.closed, "reading the reply to \(what) failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    private func wait(for events: Int16, deadline: Deadline, what: String) throws(RedisClientError) {
        try Self.wait(fd: fd, for: events, deadline: deadline) {
            RedisClientError(.timeout, "no progress on \(what) within \(deadline.seconds) s")
        }
    }

    /// Waits until `fd` is ready for `events` (or has an error to report), or the deadline.
    static func wait(fd: Int32, for events: Int16, deadline: Deadline,
                     timeout: () -> RedisClientError) throws(RedisClientError) {
        while true {
            let milliseconds = deadline.remainingMilliseconds
            guard milliseconds > 0 else { throw timeout() }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR {
                throw RedisClientError(.closed, "poll failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// A connected, non-blocking TCP socket with `TCP_NODELAY`, trying each address of the
    /// host in turn until the deadline.
    private static func connectSocket(host: String, port: Int, deadline: Deadline) throws(RedisClientError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocketType
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw RedisClientError(.connect, "cannot resolve the Redis host '\(host)': \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(first) }
        var failure = "no address for '\(host)'"
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor?.pointee {
            cursor = info.ai_next
            let fd = socket(info.ai_family, info.ai_socktype, info.ai_protocol)
            guard fd >= 0 else {
                failure = String(cString: strerror(errno))
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            do throws(RedisClientError) {
                if connect(fd, info.ai_addr, info.ai_addrlen) != 0 {
                    guard errno == EINPROGRESS || errno == EINTR else {
                        throw RedisClientError(.connect, String(cString: strerror(errno)))
                    }
                    try wait(fd: fd, for: Int16(POLLOUT), deadline: deadline) {
                        RedisClientError(.timeout, "connecting to Redis at \(host):\(port) timed out after \(deadline.seconds) s")
                    }
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    guard error == 0 else { throw RedisClientError(.connect, String(cString: strerror(error))) }
                }
                return fd
            } catch {
                _ = systemClose(fd)
                if error.kind == .timeout { throw error }
                failure = error.description
            }
        }
        throw RedisClientError(.connect, "cannot connect to Redis at \(host):\(port): \(failure)")
    }
}

/// A moment on the monotonic clock, a given time from now.
struct Deadline {
    let end: UInt64
    let seconds: TimeInterval

    init(after seconds: TimeInterval) {
        self.seconds = seconds
        end = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, seconds) * 1e9)
    }

    /// The time left in whole milliseconds, rounded up so a wait never spins at zero; 0 once past.
    var remainingMilliseconds: Int32 {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now < end else { return 0 }
        return Int32(clamping: (end - now + 999_999) / 1_000_000)
    }
}

#if canImport(Glibc)
private let streamSocketType = Int32(SOCK_STREAM.rawValue)
let sendFlags = Int32(MSG_NOSIGNAL)
private func systemClose(_ fd: Int32) -> Int32 { Glibc.close(fd) }
func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int { Glibc.send(fd, bytes, count, flags) }
#else
private let streamSocketType = SOCK_STREAM
let sendFlags: Int32 = 0 // SO_NOSIGPIPE is set on the socket instead
private func systemClose(_ fd: Int32) -> Int32 { Darwin.close(fd) }
func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int { Darwin.send(fd, bytes, count, flags) }
#endif
