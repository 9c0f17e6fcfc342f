import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1 with an ephemeral port, scriptable per path.
///
/// Used by the tests, the demo and the benchmarks. Each connection is served on its own
/// thread and kept alive until the client closes it, so a handler may block (to delay or
/// hold a response) without stalling other connections. The server counts every request
/// it receives, per path and in total; `stop()` closes every socket.
public final class LoopbackOrigin: @unchecked Sendable {
    /// What a handler sees of a request.
    public struct Request: Sendable {
        /// The method, as sent (`GET`, `POST`, ...).
        public let method: String
        /// The request target as sent: path plus query.
        public let target: String
        /// The path without the query.
        public let path: String
        /// Header fields in the order they arrived.
        public let headers: [(name: String, value: String)]
        /// The body (Content-Length bodies only).
        public let body: Data

        /// The first value of a header, compared case-insensitively.
        public func header(_ name: String) -> String? {
            let wanted = HTTPRequestParser.asciiLowercased(name)
            return headers.first { HTTPRequestParser.asciiLowercased($0.name) == wanted }?.value
        }
    }

    /// A misbehaviour the origin can be told to commit instead of answering normally.
    public enum Fault: Sendable {
        /// Reset the connection (RST) without answering.
        case reset
        /// Never answer; hold the connection until the client gives up.
        case hang
        /// Announce the whole body in Content-Length, send only part of it, then close.
        case truncate
    }

    /// What a handler answers.
    public struct Response: Sendable {
        /// The status code. The default is 200.
        public var status: Int
        /// Header fields; Content-Length is added unless given.
        public var headers: [(name: String, value: String)]
        /// The body.
        public var body: Data
        /// How long to wait before answering. The default is no delay.
        public var delay: TimeInterval
        /// A fault to commit instead of answering. The default is none.
        public var fault: Fault?

        /// A response with the given parts.
        public init(status: Int = 200, headers: [(name: String, value: String)] = [],
                    body: Data = Data(), delay: TimeInterval = 0, fault: Fault? = nil) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
            self.fault = fault
        }

        /// A response with a UTF-8 text body.
        public init(status: Int = 200, headers: [(name: String, value: String)] = [],
                    text: String, delay: TimeInterval = 0) {
            self.init(status: status, headers: headers, body: Data(text.utf8), delay: delay)
        }
    }

    /// Answers a request; `hit` counts this path's requests, starting at 1.
    public typealias Handler = @Sendable (_ request: Request, _ hit: Int) -> Response

    /// The port the origin listens on.
    public let port: Int

    private let listener: Int32
    private let lock = NSCondition()
    private var routes: [String: Handler] = [:]
    private var counts: [String: Int] = [:]
    private var total = 0
    private var connections: Set<Int32> = []
    private var stopped = false
    private let stopSignal = DispatchSemaphore(value: 0)

    /// Starts an origin listening on 127.0.0.1 at a port the system chooses.
    /// - Throws: `POSIXError` if the socket cannot be opened or bound.
    public init() throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "LoopbackOrigin.accept"
        thread.start()
    }

    deinit { stop() }

    /// The URL of a path on this origin, for example `url("/items?page=1")`.
    public func url(_ pathAndQuery: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")!
    }

    /// Routes a path (without query) to a handler, replacing any earlier one.
    public func route(_ path: String, _ handler: @escaping Handler) {
        lock.lock()
        routes[path] = handler
        lock.unlock()
    }

    /// Routes a path to a fixed response.
    public func route(_ path: String, response: Response) {
        route(path) { _, _ in response }
    }

    /// Routes a path to a body that changes on every call: `"<prefix>1"`, `"<prefix>2"`, ...
    public func routeVersioned(_ path: String, prefix: String = "v",
                               headers: [(name: String, value: String)] = [],
                               status: Int = 200) {
        route(path) { _, hit in Response(status: status, headers: headers, text: "\(prefix)\(hit)") }
    }

    /// How many requests this path (without query) received; nil counts every path.
    public func requestCount(_ path: String? = nil) -> Int {
        lock.lock()
        defer { lock.unlock() }
        guard let path else { return total }
        return counts[path, default: 0]
    }

    /// Waits until a path (nil: any path) has received at least `count` requests.
    /// - Returns: false if `timeout` passed first.
    @discardableResult
    public func waitForRequests(_ path: String? = nil, count: Int, timeout: TimeInterval = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        lock.lock()
        defer { lock.unlock() }
        while (path.map { counts[$0, default: 0] } ?? total) < count {
            if !lock.wait(until: deadline) { return (path.map { counts[$0, default: 0] } ?? total) >= count }
        }
        return true
    }

    /// Waits, without blocking the caller's thread, until a path (nil: any path) has received
    /// at least `count` requests.
    /// - Returns: false if `timeout` passed first.
    public func requests(_ path: String? = nil, count: Int, timeout: TimeInterval = 10) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: self.waitForRequests(path, count: count, timeout: timeout))
            }
        }
    }

    /// How many client connections are open now.
    public var openConnections: Int {
        lock.lock()
        defer { lock.unlock() }
        return connections.count
    }

    /// Waits, without blocking the caller's thread, until at most `count` connections are open.
    /// - Returns: false if `timeout` passed first.
    public func openConnections(atMost count: Int, timeout: TimeInterval = 10) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let deadline = Date(timeIntervalSinceNow: timeout)
                self.lock.lock()
                defer { self.lock.unlock() }
                while self.connections.count > count {
                    if !self.lock.wait(until: deadline) { break }
                }
                continuation.resume(returning: self.connections.count <= count)
            }
        }
    }

    /// Stops listening and closes every open connection. Safe to call twice.
    public func stop() {
        lock.lock()
        guard !stopped else { lock.unlock(); return }
        stopped = true
        let open = connections
        lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
        // Wake every handler that is delaying an answer.
        for _ in 0..<1024 { stopSignal.signal() }
    }

    // MARK: - Serving

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            lock.lock()
            if stopped { lock.unlock(); close(fd); return }
            connections.insert(fd)
            lock.unlock()
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            let thread = Thread { [self] in serve(fd) }
            thread.name = "LoopbackOrigin.connection"
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        var reader = SocketReader(fd: fd)
        defer {
            lock.lock()
            connections.remove(fd)
            lock.broadcast()
            lock.unlock()
            close(fd)
        }
        while true {
            let parsed: ParsedRequest
            switch HTTPRequestParser.read(from: &reader) {
            case .closed:
                return
            case .malformed(let reason):
                writeAll(fd, Self.serialize(Response(status: 400, headers: [("Connection", "close")], text: reason + "\n")))
                return
            case .request(let request):
                parsed = request
            }
            let request = parsed.request
            lock.lock()
            total += 1
            let hit = counts[request.path, default: 0] + 1
            counts[request.path] = hit
            let handler = routes[request.path]
            lock.broadcast()
            lock.unlock()

            let response = handler?(request, hit) ?? Response(status: 404, text: "no route for \(request.path)\n")
            if response.delay > 0 {
                if stopSignal.wait(timeout: .now() + response.delay) == .success { return }
            }
            switch response.fault {
            case .reset?:
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                return
            case .hang?:
                // Hold the connection until the client (or stop()) closes it.
                var byte: UInt8 = 0
                while recv(fd, &byte, 1, 0) > 0 {}
                return
            case .truncate?:
                let whole = Self.serialize(response)
                writeAll(fd, whole.prefix(whole.count - max(1, response.body.count / 2)))
                return
            case nil:
                guard writeAll(fd, Self.serialize(response, method: request.method)) else { return }
                if parsed.closeAfter { return }
            }
        }
    }

    static func serialize(_ response: Response, method: String = "GET") -> Data {
        var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        var hasLength = false
        for (name, value) in response.headers {
            if HTTPRequestParser.asciiLowercased(name) == "content-length" { hasLength = true }
            head += "\(name): \(value)\r\n"
        }
        if !hasLength { head += "Content-Length: \(response.body.count)\r\n" }
        head += "\r\n"
        var data = Data(head.utf8)
        if method != "HEAD" && response.status != 204 && response.status != 304 { data.append(response.body) }
        return data
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 410: "Gone"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    @discardableResult
    private func writeAll<D: DataProtocol>(_ fd: Int32, _ data: D) -> Bool {
        let bytes = Array(data)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}
