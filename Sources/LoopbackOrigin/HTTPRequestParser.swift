import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Buffered reads from a connected socket.
struct SocketReader {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0

    init(fd: Int32) { self.fd = fd }

    /// Reads more bytes into the buffer; false when the peer closed or the read failed.
    private mutating func fill() -> Bool {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
    }

    /// Reads up to and including CRLF CRLF; nil if the connection closed first or the head
    /// grows past `limit`.
    mutating func readHead(limit: Int) -> (bytes: [UInt8], tooLarge: Bool)? {
        // Bytes after `start` already searched; relative, because `fill()` may compact.
        var scanned = 0
        while true {
            var i = start + max(0, scanned - 3)
            while i + 3 < buffer.count {
                if buffer[i] == 13 && buffer[i + 1] == 10 && buffer[i + 2] == 13 && buffer[i + 3] == 10 {
                    let head = Array(buffer[start..<(i + 4)])
                    start = i + 4
                    return (head, false)
                }
                i += 1
            }
            scanned = buffer.count - start
            if scanned > limit { return ([], true) }
            guard fill() else { return nil }
        }
    }

    /// Reads exactly `count` bytes; nil if the connection closed first.
    mutating func read(count: Int) -> [UInt8]? {
        while buffer.count - start < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[start..<(start + count)])
        start += count
        return bytes
    }
}

struct ParsedRequest {
    let request: LoopbackOrigin.Request
    let closeAfter: Bool
}

enum ParseOutcome {
    case request(ParsedRequest)
    case malformed(String)
    case closed
}

/// Parses HTTP/1.x requests with Content-Length bodies; anything else is malformed.
enum HTTPRequestParser {
    static let headLimit = 64 * 1024
    static let bodyLimit = 16 * 1024 * 1024

    static func read(from reader: inout SocketReader) -> ParseOutcome {
        guard let (headBytes, tooLarge) = reader.readHead(limit: headLimit) else { return .closed }
        if tooLarge { return .malformed("request head too large") }
        guard let head = String(validating: headBytes, as: UTF8.self) else {
            return .malformed("request head is not UTF-8")
        }
        let parsed = parseHead(head)
        guard case .success(let (method, target, version, headers)) = parsed else {
            if case .failure(let error) = parsed { return .malformed(error.reason) }
            return .malformed("bad request")
        }
        var body = Data()
        let lengthValue = headers.first { $0.name.lowercased() == "content-length" }?.value
        if headers.contains(where: { $0.name.lowercased() == "transfer-encoding" }) {
            return .malformed("chunked request bodies are not supported")
        }
        if let lengthValue {
            guard let length = Int(lengthValue.trimmingCharacters(in: .whitespaces)),
                  length >= 0, length <= bodyLimit else {
                return .malformed("bad Content-Length")
            }
            guard let bytes = reader.read(count: length) else { return .closed }
            body = Data(bytes)
        }
        let connection = headers.first { $0.name.lowercased() == "connection" }?.value.lowercased() ?? ""
        let closeAfter = version == "HTTP/1.0" ? !connection.contains("keep-alive") : connection.contains("close")
        let path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        let request = LoopbackOrigin.Request(method: method, target: target, path: path, headers: headers, body: body)
        return .request(ParsedRequest(request: request, closeAfter: closeAfter))
    }

    struct HeadError: Error { let reason: String }

    /// Splits a request head into method, target, version and header fields.
    static func parseHead(_ head: String) -> Result<(String, String, String, [(name: String, value: String)]), HeadError> {
        var lines = head.components(separatedBy: "\r\n")
        while lines.last == "" { lines.removeLast() }
        guard let requestLine = lines.first else { return .failure(HeadError(reason: "empty request")) }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(HeadError(reason: "bad request line")) }
        let method = String(parts[0]), target = String(parts[1]), version = String(parts[2])
        guard !method.isEmpty, method.allSatisfy({ $0.isLetter && $0.isUppercase }) else {
            return .failure(HeadError(reason: "bad method"))
        }
        guard target.hasPrefix("/") else { return .failure(HeadError(reason: "bad request target")) }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(HeadError(reason: "unsupported HTTP version"))
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return .failure(HeadError(reason: "bad header line")) }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" ") else { return .failure(HeadError(reason: "bad header name")) }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
        }
        return .success((method, target, version, headers))
    }
}
