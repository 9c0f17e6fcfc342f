import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// The client's connections and pool against a scripted server that misbehaves on purpose:
/// cut replies, garbage, closed connections, silence. No `redis-server` needed.
@Suite("Redis connections and pool")
struct RedisConnectionTests {
    static func store(_ server: ScriptedRedisServer, poolSize: Int = 1, timeout: TimeInterval = 0.3) throws -> RedisResponseStore {
        try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: server.port, connectTimeout: timeout,
                                                                 commandTimeout: timeout, retryDelay: 0.2, poolSize: poolSize))
    }

    @Test("a reply cut off by a timeout is never read as the answer to the next command: the connection is closed")
    func cutReply() throws {
        let server = try ScriptedRedisServer { connection, _ in
            // The first connection sends half a reply, then (too late) the rest and a stray reply.
            connection == 0 ? .partial(Array("$5\r\nPO".utf8), later: Array("NG!\r\n+PONG\r\n".utf8)) : .reply(Array("+PONG\r\n".utf8))
        }
        defer { server.stop() }
        let store = try Self.store(server)
        let start = Date()
        #expect(throws: HTTPCachingError.self) { try store.ping() }
        #expect(Date().timeIntervalSince(start) < 2)
        server.releaseLaterBytes()
        try store.ping()
        try store.ping()
        #expect(server.connectionCount == 2, "the cut connection was replaced, not reused")
    }

    @Test("bytes that are not RESP close the connection with a clear error; the next call reconnects")
    func garbage() throws {
        let server = try ScriptedRedisServer { connection, _ in
            connection == 0 ? .reply(Array("?garbage\r\n".utf8)) : .reply(Array("+PONG\r\n".utf8))
        }
        defer { server.stop() }
        let store = try Self.store(server)
        do {
            try store.ping()
            Issue.record("garbage was taken as PONG")
        } catch let error as HTTPCachingError where error.code == .unavailable {
            let reason = error.detail ?? error.description
            #expect(reason.contains("not RESP2") && reason.contains("unknown reply type"), "\(reason)")
        }
        try store.ping()
        #expect(server.connectionCount == 2)
    }

    @Test("a bulk length larger than any entry is refused before the bytes arrive or are allocated")
    func hugeLength() throws {
        let server = try ScriptedRedisServer { _, _ in .reply(Array("$536870000\r\nabc".utf8)) }
        defer { server.stop() }
        let store = try Self.store(server)
        do {
            try store.ping()
            Issue.record("a huge length was accepted")
        } catch let error as HTTPCachingError where error.code == .unavailable {
            let reason = error.detail ?? error.description
            #expect(reason.contains("over the limit"), "\(reason)")
        }
    }

    @Test("an idle connection the server closed (a restart) is noticed before use: no call fails for it")
    func closedWhileIdle() throws {
        let server = try ScriptedRedisServer { connection, _ in
            connection == 0 ? .replyThenClose(Array("+PONG\r\n".utf8)) : .reply(Array("+PONG\r\n".utf8))
        }
        defer { server.stop() }
        let store = try Self.store(server)
        try store.ping()
        #expect(eventually { server.closedCount == 1 })
        try store.ping()
        #expect(server.connectionCount == 2)
    }

    @Test("an idle connection the server closes as the next command arrives (after the idle check): the command goes once more on a new connection, and no call fails for it")
    func closedAfterTheIdleCheck() throws {
        let server = try ScriptedRedisServer { connection, command in
            connection == 0 && command == 1 ? .replyThenClose([]) : .reply(Array("+PONG\r\n".utf8))
        }
        defer { server.stop() }
        let store = try Self.store(server)
        try store.ping()
        try store.ping()
        #expect(server.connectionCount == 2)
        try store.ping()
        #expect(server.connectionCount == 2, "the new connection is kept")
    }

    @Test("a silent server: each call fails after the command timeout; waiting for the one busy connection is bounded too")
    func silentServer() throws {
        let server = try ScriptedRedisServer { _, _ in .silence }
        defer { server.stop() }
        let store = try Self.store(server, poolSize: 1, timeout: 0.3)
        let durations = Mutex<[TimeInterval]>([])
        let reasons = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            let start = Date()
            do {
                try store.ping()
            } catch {
                reasons.withLock { $0.append("\(error)") }
            }
            durations.withLock { $0.append(Date().timeIntervalSince(start)) }
        }
        let slowest = durations.withLock { $0.max() ?? 0 }
        #expect(reasons.withLock { $0.count } == 3)
        #expect(slowest < 1.5, "with one connection and a 0.3 s timeout the slowest of 3 calls took \(slowest) s")
        #expect(reasons.withLock { $0.contains { $0.contains("within 0.3 s") } })
    }

    @Test("a connection that cannot be made in time fails after the connect timeout; then calls fail at once until the retry delay")
    func connectTimeout() throws {
        let listener = try FullBacklogListener()
        defer { listener.close() }
        let store = try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: listener.port, connectTimeout: 0.3,
                                                                             commandTimeout: 0.3, retryDelay: 30))
        var start = Date()
        do {
            try store.ping()
            Issue.record("connected to a full backlog")
        } catch let error as HTTPCachingError where error.code == .unavailable {
            let reason = error.detail ?? error.description
            #expect(reason.contains("timed out after 0.3 s"), "\(reason)")
        }
        let first = Date().timeIntervalSince(start)
        #expect(first >= 0.25 && first < 1.5, "the connect timeout took \(first) s")
        start = Date()
        do {
            try store.ping()
        } catch let error as HTTPCachingError where error.code == .unavailable {
            let reason = error.detail ?? error.description
            #expect(reason.contains("calls fail at once for 30.0 s"), "\(reason)")
        }
        #expect(Date().timeIntervalSince(start) < 0.25, "no second connect attempt (it would take the 0.3 s timeout) while the retry delay runs")
    }
}

/// A TCP server on 127.0.0.1 that answers each command it reads as a script says, by
/// connection and command number (both from 0).
final class ScriptedRedisServer: @unchecked Sendable {
    enum Answer {
        /// These bytes.
        case reply([UInt8])
        /// These bytes now, and `later` once the test calls `releaseLaterBytes()`.
        case partial([UInt8], later: [UInt8])
        /// These bytes, then close the connection.
        case replyThenClose([UInt8])
        /// Nothing, ever.
        case silence
    }

    let port: Int
    private let listener: Int32
    private let script: @Sendable (_ connection: Int, _ command: Int) -> Answer
    private let state = Mutex<(connections: Int, closed: Int, open: [Int32], stopped: Bool)>((0, 0, [], false))
    private let later = DispatchSemaphore(value: 0)

    init(_ script: @escaping @Sendable (_ connection: Int, _ command: Int) -> Answer) throws {
        self.script = script
        (listener, port) = try listeningSocket(backlog: 16)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    var connectionCount: Int { state.withLock { $0.connections } }
    var closedCount: Int { state.withLock { $0.closed } }

    func releaseLaterBytes() { later.signal() }

    /// Closes the listener and every connection; the server's threads end.
    func stop() {
        // Under the lock: a connection's thread closes its descriptor under it too, so no
        // number reused by another socket since is shut down here.
        state.withLock { state in
            state.stopped = true
            for fd in state.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        later.signal()
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                if errno == EINTR { continue }
                break
            }
            let number: Int? = state.withLock { state in
                guard !state.stopped else { return nil }
                state.connections += 1
                state.open.append(fd)
                return state.connections - 1
            }
            guard let number else { Glibc.close(fd); break }
            Thread.detachNewThread { [self] in serve(fd, number) }
        }
        Glibc.close(listener)
    }

    private func serve(_ fd: Int32, _ connection: Int) {
        var parser = RESPParser()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var command = 0
        defer {
            state.withLock { state in
                state.open.removeAll { $0 == fd }
                Glibc.close(fd)
                state.closed += 1
            }
        }
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            guard count > 0 else { return }
            parser.append(buffer[0..<count])
            while (try? parser.next()) != nil {
                switch script(connection, command) {
                case .reply(let bytes):
                    write(fd, bytes)
                case .partial(let now, let rest):
                    write(fd, now)
                    later.wait()
                    write(fd, rest)
                case .replyThenClose(let bytes):
                    write(fd, bytes)
                    return
                case .silence:
                    break
                }
                command += 1
            }
        }
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}

/// A listening socket that never accepts, its backlog filled, so a new connection waits for
/// the handshake until it times out.
final class FullBacklogListener {
    let port: Int
    private let listener: Int32
    private var fillers: [Int32] = []

    init() throws {
        (listener, port) = try listeningSocket(backlog: 0)
        // Linux queues backlog + 1 connections; more fill it for certain.
        for _ in 0..<4 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var address = loopback(port: port)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(fd)
        }
    }

    func close() {
        for fd in fillers { Glibc.close(fd) }
        Glibc.close(listener)
    }
}

private func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return address
}

/// A TCP socket listening on 127.0.0.1 at an ephemeral port.
private func listeningSocket(backlog: Int32) throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = loopback(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound, listen(fd, backlog) == 0 else {
        Glibc.close(fd)
        throw RedisServer.Failure(description: "cannot listen on 127.0.0.1: \(String(cString: strerror(errno)))")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
