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
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32) { self.fd = fd }

    /// Reads more bytes into the buffer; false when the peer closed or the read failed.
    private mutating func fill() -> Bool {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
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

    /// Reads one line, CRLF removed; nil if the connection closed first, or the line grows
    /// past `limit`.
    mutating func readLine(limit: Int) -> [UInt8]? {
        var scanned = 0
        while true {
            var i = start + max(0, scanned - 1)
            while i + 1 < buffer.count {
                if buffer[i] == 13 && buffer[i + 1] == 10 {
                    let line = Array(buffer[start..<i])
                    start = i + 2
                    return line
                }
                i += 1
            }
            scanned = buffer.count - start
            if scanned > limit { return nil }
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

/// Parses HTTP/1.x requests with Content-Length or chunked bodies; anything else is malformed.
enum HTTPRequestParser {
    static let headLimit = 64 * 1024
    static let bodyLimit = 16 * 1024 * 1024

    /// - Parameter continues: whether an `Expect: 100-continue` gets its `100 Continue`.
    static func read(from reader: inout SocketReader, continues: Bool) -> ParseOutcome {
        guard let (headBytes, tooLarge) = reader.readHead(limit: headLimit) else { return .closed }
        if tooLarge { return .malformed("request head too large") }
        let parsed = parseHead(headBytes)
        guard case .success(let (method, target, version, headers)) = parsed else {
            if case .failure(let error) = parsed { return .malformed(error.reason) }
            return .malformed("bad request")
        }
        var body = Data()
        let lengthValue = headers.first { asciiLowercased($0.name) == "content-length" }?.value
        if continues, version == "HTTP/1.1", headers.contains(where: { asciiLowercased($0.name) == "expect" && asciiLowercased($0.value) == "100-continue" }) {
            // The interim answer the client waits for (or a second) before the body (RFC 9110 section 10.1.1).
            LoopbackOrigin.writeAll(reader.fd, Data("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        if let coding = headers.first(where: { asciiLowercased($0.name) == "transfer-encoding" })?.value {
            guard asciiLowercased(coding).trimmingCharacters(in: .whitespaces) == "chunked" else {
                return .malformed("unsupported transfer coding")
            }
            switch readChunked(from: &reader) {
            case .success(let bytes): body = bytes
            case .failure(let error): return error.reason == "closed" ? .closed : .malformed(error.reason)
            }
        } else if let lengthValue {
            guard let length = Int(lengthValue),
                  length >= 0, length <= bodyLimit else {
                return .malformed("bad Content-Length")
            }
            guard let bytes = reader.read(count: length) else { return .closed }
            body = Data(bytes)
        }
        let connection = asciiLowercased(headers.first { asciiLowercased($0.name) == "connection" }?.value ?? "")
        let closeAfter = version == "HTTP/1.0" ? !connection.contains("keep-alive") : connection.contains("close")
        let path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        let request = LoopbackOrigin.Request(method: method, target: target, path: path, headers: headers, body: body)
        return .request(ParsedRequest(request: request, closeAfter: closeAfter))
    }

    struct HeadError: Error { let reason: String }

    /// Whether a byte may appear in a token (`tchar`, RFC 9110 section 5.6.2).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 48...57, 65...90, 97...122: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// Reads a chunked body (RFC 9112 section 7.1): sizes in hex, extensions and trailers
    /// ignored, at most `bodyLimit` bytes.
    static func readChunked(from reader: inout SocketReader) -> Result<Data, HeadError> {
        var body = Data()
        while true {
            guard let line = reader.readLine(limit: 1024) else { return .failure(HeadError(reason: "closed")) }
            let sizeText = String(decoding: line.prefix { $0 != 59 /* ; */ }, as: UTF8.self).trimmingCharacters(in: .whitespaces)
            guard !sizeText.isEmpty, sizeText.count <= 8, let size = Int(sizeText, radix: 16) else {
                return .failure(HeadError(reason: "bad chunk size"))
            }
            if size == 0 {
                while true { // trailer fields, up to the empty line
                    guard let trailer = reader.readLine(limit: headLimit) else { return .failure(HeadError(reason: "closed")) }
                    if trailer.isEmpty { return .success(body) }
                }
            }
            guard body.count + size <= bodyLimit else { return .failure(HeadError(reason: "body too large")) }
            guard let bytes = reader.read(count: size), let end = reader.read(count: 2) else {
                return .failure(HeadError(reason: "closed"))
            }
            guard end == [13, 10] else { return .failure(HeadError(reason: "bad chunk")) }
            body.append(contentsOf: bytes)
        }
    }

    /// Splits a request head (bytes up to and including CRLF CRLF) into method, target,
    /// version and header fields. Works on bytes: this is on every request's path.
    static func parseHead(_ head: [UInt8]) -> Result<(String, String, String, [(name: String, value: String)]), HeadError> {
        let cr: UInt8 = 13, lf: UInt8 = 10, space: UInt8 = 32, tab: UInt8 = 9, colon: UInt8 = 58
        var lines: [ArraySlice<UInt8>] = []
        var start = 0, i = 0
        while i + 1 < head.count {
            if head[i] == cr && head[i + 1] == lf {
                if i > start { lines.append(head[start..<i]) } else if !lines.isEmpty { break }
                i += 2
                start = i
            } else {
                i += 1
            }
        }
        guard let requestLine = lines.first else { return .failure(HeadError(reason: "empty request")) }
        let parts = requestLine.split(separator: space, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(HeadError(reason: "bad request line")) }
        // Any token (RFC 9110 section 9.1): M-SEARCH and other extension methods pass, and so
        // does a lower-case one, a method of its own (methods are case-sensitive).
        guard !parts[0].isEmpty, parts[0].allSatisfy({ isTokenByte($0) }) else {
            return .failure(HeadError(reason: "bad method"))
        }
        guard parts[1].first == 47 /* / */, let target = String(validating: parts[1], as: UTF8.self) else {
            return .failure(HeadError(reason: "bad request target"))
        }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(HeadError(reason: "unsupported HTTP version"))
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colonIndex = line.firstIndex(of: colon) else { return .failure(HeadError(reason: "bad header line")) }
            let name = line[line.startIndex..<colonIndex]
            guard !name.isEmpty, !name.contains(space), !name.contains(tab) else {
                return .failure(HeadError(reason: "bad header name"))
            }
            var value = line[(colonIndex + 1)...]
            while let first = value.first, first == space || first == tab { value = value.dropFirst() }
            while let last = value.last, last == space || last == tab { value = value.dropLast() }
            guard let nameText = String(validating: name, as: UTF8.self), let valueText = String(validating: value, as: UTF8.self) else {
                return .failure(HeadError(reason: "header is not UTF-8"))
            }
            headers.append((nameText, valueText))
        }
        return .success((String(decoding: parts[0], as: UTF8.self), target, version, headers))
    }

    /// Lower-cases ASCII letters only (header names are ASCII).
    static func asciiLowercased(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) else { return text }
        return String(decoding: text.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
    }
}
