import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The anchor the Redis store is measured against: the least a Redis read can cost from this
/// process. One blocking TCP socket (`TCP_NODELAY`), no pool, no queue, no parser beyond what
/// RESP needs: `GET` sent in one `send`, then `recv` until the whole bulk reply is in.
final class RawRedisClient {
    private let fd: Int32
    /// Put before every key.
    private let prefix: String
    private var buffer = [UInt8](repeating: 0, count: 256 << 10)

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(port: Int, prefix: String) throws {
        self.prefix = prefix
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect: \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    /// `SET key value`, checked for `+OK`.
    func set(_ key: String, _ value: [UInt8]) throws {
        try send(command(["SET", prefix + key].map { Array($0.utf8) } + [value]))
        let reply = try readReply()
        guard reply.kind == UInt8(ascii: "+") else { throw Failure(description: "SET refused") }
    }

    /// `GET key`; the length of the value read (-1 for none).
    func get(_ key: String) throws -> Int {
        try send(command([Array("GET".utf8), Array((prefix + key).utf8)]))
        return try readReply().length
    }

    /// A command in its wire form.
    private func command(_ arguments: [[UInt8]]) -> [UInt8] {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            out += "$\(argument.count)\r\n".utf8
            out += argument
            out += [13, 10]
        }
        return out
    }

    private func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// Reads one reply: a status line, or a bulk string read to its end. The reply's type
    /// byte, and the bulk length (-1 for a null or a status).
    private func readReply() throws -> (kind: UInt8, length: Int) {
        var have = 0
        var lineEnd: Int?
        while lineEnd == nil {
            have += try receive(at: have)
            lineEnd = (1..<max(1, have)).first { buffer[$0 - 1] == 13 && buffer[$0] == 10 }
        }
        let kind = buffer[0]
        guard kind == UInt8(ascii: "$") else { return (kind, -1) }
        guard let length = Int(String(decoding: buffer[1..<lineEnd! - 1], as: UTF8.self)) else {
            throw Failure(description: "a bad bulk length")
        }
        guard length >= 0 else { return (kind, -1) }
        let total = lineEnd! + 1 + length + 2
        if buffer.count < total { buffer += [UInt8](repeating: 0, count: total - buffer.count) }
        while have < total { have += try receive(at: have) }
        return (kind, length)
    }

    private func receive(at offset: Int) throws -> Int {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, $0.count - offset, 0) }
        guard count > 0 else { throw Failure(description: count == 0 ? "closed" : "recv: \(String(cString: strerror(errno)))") }
        return count
    }
}
