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
/// hold a response) without stalling other connections. The server counts and records every
/// request it receives, per path. Beyond fixed responses it can stream a body the test writes
/// (`BodyStream`), hold a response at a `Gate` the test opens, pace a body for benchmarks,
/// answer Basic authentication challenges and redirects, and write raw bytes. `stop()` closes
/// every socket, held and streaming ones included, and waits for every thread to end.
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

        /// Every value of a header, one per line, in order, compared case-insensitively.
        public func values(_ name: String) -> [String] {
            let wanted = HTTPRequestParser.asciiLowercased(name)
            return headers.filter { HTTPRequestParser.asciiLowercased($0.name) == wanted }.map(\.value)
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
    ///
    /// Any status and any header lines may be sent, repeated names included (two `Expires`
    /// lines, several `Set-Cookie`), in the order given. `Content-Length` is added unless
    /// given, except for 1xx, 204 and 304 answers, which have no body.
    public struct Response: Sendable {
        /// The status code. The default is 200.
        public var status: Int
        /// Header fields, sent in this order; Content-Length is added unless given.
        public var headers: [(name: String, value: String)]
        /// The body.
        public var body: Data
        /// How long to wait before answering. The default is no delay.
        public var delay: TimeInterval
        /// A fault to commit instead of answering. The default is none.
        public var fault: Fault?
        /// A body written by the test while the response is under way, instead of `body`. The
        /// default is none.
        public var stream: BodyStream?
        /// A gate to wait at before sending anything. The default is none.
        public var headGate: Gate?
        /// A gate to wait at after the headers and before the body. The default is none.
        public var bodyGate: Gate?
        /// A rate to send `body` at. The default is all at once.
        public var pace: Pace?
        /// Exact bytes to write instead of a response built from the fields above, after which
        /// the connection closes. The default is none.
        public var raw: Data?

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

    /// How many requests per path `requests(for:)` keeps: the most recent ones.
    public static let recordedRequestsPerPath = 1000

    private let listener: Int32
    private let lock = NSCondition()
    private var routes: [String: Handler] = [:]
    private var counts: [String: Int] = [:]
    private var recorded: [String: [Request]] = [:]
    private var total = 0
    private var connections: Set<Int32> = []
    private var stopped = false
    private var continues = true
    /// The origin's own threads (accept and connections) still running.
    private var threads: Set<ObjectIdentifier> = []
    /// Readable once `stop()` has run: every wait in a connection thread polls it.
    let stopPipe = WakePipe()

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
        startThread(named: "LoopbackOrigin.accept") { [self] in acceptLoop() }
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

    /// Where a route's first answer waits (`routeVersioned(holdingFirst:)`): at the gate before
    /// its head, or after its head and before its body.
    public enum Hold: Sendable {
        case head(Gate)
        case body(Gate)
    }

    /// Routes a path to a body that changes on every call: `"<prefix>1"`, `"<prefix>2"`, ...;
    /// the first answer waits as `holdingFirst` says. The default holds none.
    public func routeVersioned(_ path: String, prefix: String = "v",
                               headers: [(name: String, value: String)] = [],
                               status: Int = 200, holdingFirst hold: Hold? = nil) {
        route(path) { _, hit in
            var response = Response(status: status, headers: headers, text: "\(prefix)\(hit)")
            switch hit == 1 ? hold : nil {
            case .head(let gate)?: response.headGate = gate
            case .body(let gate)?: response.bodyGate = gate
            case nil: break
            }
            return response
        }
    }

    /// How many requests this path (without query) received; nil counts every path.
    public func requestCount(_ path: String? = nil) -> Int {
        lock.lock()
        defer { lock.unlock() }
        guard let path else { return total }
        return counts[path, default: 0]
    }

    /// The requests a path (without query) received, oldest first, with their header fields
    /// and bodies: the most recent `recordedRequestsPerPath` of them.
    public func requests(for path: String) -> [Request] {
        lock.lock()
        defer { lock.unlock() }
        return recorded[path] ?? []
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

    /// Whether a request with `Expect: 100-continue` gets a `100 Continue` before its body is
    /// read; true by default. False is a server that ignores `Expect`: the client sends the
    /// body after waiting (libcurl waits a second).
    public var answersExpectContinue: Bool {
        get { lock.lock(); defer { lock.unlock() }; return continues }
        set { lock.lock(); continues = newValue; lock.unlock() }
    }

    /// How many of the origin's threads (the accept thread and one per connection) are running.
    /// Zero once `stop()` has returned.
    public var runningThreads: Int {
        lock.lock()
        defer { lock.unlock() }
        return threads.count
    }

    /// Stops listening, closes every open connection (held, streaming and paced ones
    /// included) and waits, up to 5 seconds, until every thread of the origin has ended.
    /// Safe to call twice, and from a handler (which then does not wait for its own thread).
    public func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        if first {
            // First, so a waiting response ends as stopped, not as closed by the client.
            stopPipe.signal() // never drained: every later poll sees it
            // Under the lock: a connection's thread removes its descriptor under it before
            // closing it, so every number shut down here is still this origin's, never one
            // reused since by another origin's connection.
            for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
            shutdown(listener, Int32(SHUT_RDWR)) // accept fails; the accept thread closes it
        }
        lock.unlock()
        let me = ObjectIdentifier(Thread.current)
        let deadline = Date(timeIntervalSinceNow: 5)
        lock.lock()
        while !threads.subtracting([me]).isEmpty {
            if !lock.wait(until: deadline) { break }
        }
        lock.unlock()
    }

    // MARK: - Serving

    /// Starts one of the origin's threads, tracked so `stop()` can wait for it.
    private func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            defer {
                lock.lock()
                threads.remove(ObjectIdentifier(Thread.current))
                lock.broadcast()
                lock.unlock()
            }
            body()
        }
        thread.name = name
        lock.lock()
        threads.insert(ObjectIdentifier(thread))
        lock.unlock()
        thread.start()
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            let code = errno
            lock.lock()
            let ended = stopped
            if !ended && fd >= 0 { connections.insert(fd) }
            lock.unlock()
            // The listener is closed here, not in stop(): never an accept on a number reused since.
            if ended { if fd >= 0 { close(fd) }; close(listener); return }
            if fd < 0 {
                // Out of descriptors or a connection gone before it was taken: try again soon
                // (a stop meanwhile is seen above, once stop() is done with the listener).
                if code != EINTR && code != ECONNABORTED { _ = pause(0.01) }
                continue
            }
            var yes: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            startThread(named: "LoopbackOrigin.connection") { [self] in serve(fd) }
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
            lock.lock()
            let continues = self.continues
            lock.unlock()
            switch HTTPRequestParser.read(from: &reader, continues: continues) {
            case .closed:
                return
            case .malformed(let reason):
                Self.writeAll(fd, Self.serialize(Response(status: 400, headers: [("Connection", "close")], text: reason + "\n")))
                return
            case .request(let request):
                parsed = request
            }
            let request = parsed.request
            lock.lock()
            total += 1
            let hit = counts[request.path, default: 0] + 1
            counts[request.path] = hit
            recorded[request.path, default: []].append(request)
            if recorded[request.path]!.count > Self.recordedRequestsPerPath { recorded[request.path]!.removeFirst() }
            let handler = routes[request.path]
            lock.broadcast()
            lock.unlock()

            let response = handler?(request, hit) ?? Response(status: 404, text: "no route for \(request.path)\n")
            guard respond(response, to: request, on: fd) == .keepAlive, !parsed.closeAfter else { return }
        }
    }
}
