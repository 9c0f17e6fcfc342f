import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching

/// A request body from the command line: `--data STRING` or `--data-file PATH`.
enum RequestBody: Equatable {
    /// `--data STRING`: the string's UTF-8 bytes, as given (a leading `@` is not a file name).
    case text(String)
    /// `--data-file PATH`: the file's bytes, read before the first request.
    case file(String)

    /// The bytes to send.
    /// - Throws: `RequestBodyError` when the file cannot be read.
    func data() throws(RequestBodyError) -> Data {
        switch self {
        case .text(let text):
            return Data(text.utf8)
        case .file(let path):
            if let data = FileManager.default.contents(atPath: path) { return data }
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            let reason = !exists ? "no such file" : isDirectory.boolValue ? "it is a directory" : "it cannot be read"
            throw RequestBodyError(description: "--data-file: cannot read '\(path)': \(reason)")
        }
    }

    /// How the body is shown in the table: the text, shortened, or `@` and the file's name.
    var label: String {
        switch self {
        case .text(let text): text.count > 24 ? text.prefix(23) + "…" : text
        case .file(let path): "@" + (path as NSString).lastPathComponent
        }
    }
}

/// A body named on the command line that cannot be read; the demo exits with status 2.
struct RequestBodyError: Error, Equatable, CustomStringConvertible {
    let description: String
}

extension FetchOptions {
    /// The options that shape the request, each with a value.
    static let requestOptions = ["-X", "--request", "--data", "--data-file"]

    /// The `Content-Type` a body is sent with when `-H` gives none, as curl does for `--data`.
    static let defaultContentType = "application/x-www-form-urlencoded"

    /// Takes one of `requestOptions`.
    mutating func setRequestOption(_ name: String, _ text: String) throws(UsageError) {
        switch name {
        case "-X", "--request":
            guard !text.isEmpty, text.utf8.allSatisfy(Self.isTokenByte) else {
                throw UsageError(description: "\(name) takes a method such as GET, POST or QUERY, not '\(text)'")
            }
            method = text
        case "--data":
            bodies.append(.text(text))
        default:
            guard !text.isEmpty else { throw UsageError(description: "--data-file needs a file path") }
            bodies.append(.file(text))
        }
    }

    /// Checks the request options together, once every argument has been read.
    func checkRequest() throws(UsageError) {
        let files = bodies.filter { if case .file = $0 { true } else { false } }.count
        if files > 0 && files < bodies.count {
            throw UsageError(description: "--data and --data-file cannot be used together: give the bodies one way")
        }
        if keysBody && ["GET", "HEAD"].contains(effectiveMethod.uppercased()) {
            throw UsageError(description: "--key-body keys a request's body, and a \(effectiveMethod) never has its body keyed: add --data, --data-file or -X")
        }
    }

    /// The method sent: `method`, else POST with a body and GET without, as curl does.
    var effectiveMethod: String { method ?? (bodies.isEmpty ? "GET" : "POST") }

    /// Whether `url` is a path on the embedded origin rather than a URL of its own.
    var usesEmbeddedOrigin: Bool { url.scheme == nil }

    /// The bodies' bytes, files read, in order (empty without bodies).
    /// - Throws: `RequestBodyError` for a file that cannot be read.
    func payloads() throws(RequestBodyError) -> [Data] {
        var payloads: [Data] = []
        for body in bodies { payloads.append(try body.data()) }
        return payloads
    }

    /// The requests of one round: one per payload, or one without a body when there is none;
    /// each with the method and header fields, `Content-Type` `defaultContentType` when a body
    /// has none from `-H`, and `keysBody` when `--key-body` was given.
    func requests(to url: URL, payloads: [Data]) -> [URLRequest] {
        let sendsContentType = headers.contains { $0.name.caseInsensitiveCompare("Content-Type") == .orderedSame }
        return (payloads.isEmpty ? [nil] : payloads.map(Optional.some)).map { payload in
            var request = URLRequest(url: url)
            request.httpMethod = effectiveMethod
            for header in headers { request.addValue(header.value, forHTTPHeaderField: header.name) }
            if let payload {
                request.httpBody = payload
                if !sendsContentType { request.setValue(Self.defaultContentType, forHTTPHeaderField: "Content-Type") }
            }
            if keysBody { request.keysBody = true }
            return request
        }
    }

    /// What the table shows of each request of a round: the method, and the body's label.
    var requestLabels: [String] {
        bodies.isEmpty ? [effectiveMethod] : bodies.map { "\(effectiveMethod) \($0.label)" }
    }

    /// Whether a byte may be part of a method name (an RFC 9110 token).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
