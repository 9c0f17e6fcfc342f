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
        fd = try Self.connect(port: port)
    }

    /// A blocking TCP socket (`TCP_NODELAY`) connected to 127.0.0.1:`port`.
    static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect: \(String(cString: strerror(errno)))")
        }
        return fd
    }

    deinit { close(fd) }

    /// `SET key value`, checked for `+OK`.
    func set(_ key: String, _ value: [UInt8]) throws {
        try send(Self.command(["SET", prefix + key].map { Array($0.utf8) } + [value]))
        let reply = try readReply()
        guard reply.kind == UInt8(ascii: "+") else { throw Failure(description: "SET refused") }
    }

    /// `GET key`; the length of the value read (-1 for none).
    func get(_ key: String) throws -> Int {
        try sendGet(key)
        return try readReply().length
    }

    /// `GET key`: the value (nil for none).
    func value(_ key: String) throws -> Data? {
        try sendGet(key)
        return try readValue()
    }

    /// Sends `GET key`; `readValue()` reads its reply.
    func sendGet(_ key: String) throws {
        try send(Self.command([Array("GET".utf8), Array((prefix + key).utf8)]))
    }

    /// The value of the `GET` sent last (nil for none).
    func readValue() throws -> Data? {
        let reply = try readReply()
        return reply.length < 0 ? nil : Data(buffer[reply.start..<reply.start + reply.length])
    }

    /// A command in its wire form.
    static func command(_ arguments: [[UInt8]]) -> [UInt8] {
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
    /// byte, and where the bulk value starts in `buffer` and its length (-1 for a null or a status).
    private func readReply() throws -> (kind: UInt8, start: Int, length: Int) {
        var have = 0
        while true {
            have += try receive(at: have)
            if let reply = Self.bulkReply(in: buffer, count: have) {
                return (buffer[0], reply.start, reply.length)
            }
            if have == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
        }
    }

    /// The whole reply at the start of `bytes[0..<count]`, once it is all there: where a bulk
    /// value starts and its length (-1 for a null bulk string or any other reply), else nil.
    static func bulkReply(in bytes: [UInt8], count: Int) -> (start: Int, length: Int)? {
        guard let lineEnd = (1..<max(1, count)).first(where: { bytes[$0 - 1] == 13 && bytes[$0] == 10 }) else { return nil }
        guard bytes[0] == UInt8(ascii: "$"), let length = Int(String(decoding: bytes[1..<lineEnd - 1], as: UTF8.self)),
              length >= 0 else { return (lineEnd + 1, -1) }
        return count >= lineEnd + 1 + length + 2 ? (lineEnd + 1, length) : nil
    }

    private func receive(at offset: Int) throws -> Int {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, $0.count - offset, 0) }
        guard count > 0 else { throw Failure(description: count == 0 ? "closed" : "recv: \(String(cString: strerror(errno)))") }
        return count
    }
}
