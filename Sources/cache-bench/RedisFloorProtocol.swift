import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A URLProtocol with no cache in it answering from Redis: the floor protocol's canned answer,
/// with its body read by one `GET` of a value of the same size, and nothing else (no pool, no
/// decoding, no checks; the key is the URL's last path component).
///
/// Three ways:
/// - `early` (the `rearly` column): the `GET` sent, blocking, when Foundation makes the
///   protocol (in the task's `resume()`, on Foundation's queue), its reply read, blocking, in
///   `startLoading`: the round trip overlaps Foundation's own hop to `startLoading`.
/// - `inline` (the `rinline` column): the `GET` on the loading thread, Foundation's shared
///   queue, blocking it for the round trip, which the cache may not do.
/// - `source` (the `rsource` column): the `GET` sent without waiting from the loading thread,
///   its reply read by a dispatch read source and the answer handed to the client from the
///   source's queue. It never waits on Foundation's queue and skips the hop back to the task's
///   work queue that a real cache needs for its client calls (a thread of its own blocked in
///   `recv` might wake once less than a dispatch source).
///
/// For sequential requests only (one request in flight): a bench, not a client.
final class RedisFloorProtocol: URLProtocol {
    /// The connections, set before any request.
    nonisolated(unsafe) static var link: RedisFloorLink?

    /// Whether this request's `GET` went out when Foundation made the protocol (`rearly`).
    private var sentEarly = false

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    required init(request: URLRequest, cachedResponse: CachedURLResponse?, client: (any URLProtocolClient)?) {
        super.init(request: request, cachedResponse: cachedResponse, client: client)
        if let url = request.url, url.path.hasPrefix("/rearly/"), let link = Self.link, let key = RedisFloorLink.key(of: url) {
            sentEarly = link.earlySend(key)
        }
    }

    override func startLoading() {
        guard let url = request.url, let link = Self.link else {
            client?.urlProtocol(self, didFailWithError: URLError(.badURL))
            return
        }
        if sentEarly { return answer(url, link.earlyRead()) } // the key was read in `init`
        guard let key = RedisFloorLink.key(of: url) else {
            client?.urlProtocol(self, didFailWithError: URLError(.badURL))
            return
        }
        if url.path.hasPrefix("/rinline/") || url.path.hasPrefix("/rearly/") {
            answer(url, link.blockingGet(key))
        } else {
            let box = Unchecked(value: self)
            link.sourceGet(key) { body in box.value.answer(url, body) }
        }
    }

    private func answer(_ url: URL, _ body: Data?) {
        guard let body else {
            client?.urlProtocol(self, didFailWithError: URLError(.cannotLoadFromNetwork))
            return
        }
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: FloorProtocol.headers)!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// A value handed to another thread that Swift cannot check (a URLProtocol, used by one thread at a time).
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
}

/// The connections `RedisFloorProtocol` reads through: two blocking (`RawRedisClient`), one
/// non-blocking watched by a read source.
final class RedisFloorLink: @unchecked Sendable {
    private let blocking: RawRedisClient
    private let early: RawRedisClient
    private let fd: Int32
    private let queue = DispatchQueue(label: "cache-bench.redis-floor")
    private let source: any DispatchSourceRead
    private let prefix: String
    /// Touched only on `queue`, but for `pending`, set before the send.
    private var buffer = [UInt8](repeating: 0, count: 256 << 10)
    private var have = 0
    private let pending = Mutex<(@Sendable (Data?) -> Void)?>(nil)

    init(port: Int, prefix: String) throws {
        self.prefix = prefix
        blocking = try RawRedisClient(port: port, prefix: prefix)
        early = try RawRedisClient(port: port, prefix: prefix)
        let fd = try RawRedisClient.connect(port: port)
        self.fd = fd
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setCancelHandler { Glibc.close(fd) }
        source.setEventHandler { [weak self] in self?.readAvailable() }
        source.resume()
    }

    /// Stops reading and closes the socket (once the source has let go of it); a `GET` still
    /// waiting gets nil.
    func close() {
        source.cancel()
        queue.async { self.fail() }
    }

    deinit { source.cancel() }

    /// The raw key a floor URL names: `/rinline/KEY` or `/rsource/KEY` (`RedisBench.rawKey`).
    static func key(of url: URL) -> String? {
        let key = url.lastPathComponent
        return key.isEmpty ? nil : key
    }

    func blockingGet(_ key: String) -> Data? {
        try? blocking.value(key)
    }

    /// Sends `GET key` on the early connection; whether it went.
    func earlySend(_ key: String) -> Bool {
        (try? early.sendGet(key)) != nil
    }

    /// The reply to the last `earlySend`.
    func earlyRead() -> Data? {
        try? early.readValue()
    }

    /// Sends `GET key` without waiting; `done` gets the value on the source's queue.
    func sourceGet(_ key: String, _ done: @escaping @Sendable (Data?) -> Void) {
        pending.withLock { $0 = done }
        let out = RawRedisClient.command([Array("GET".utf8), Array((prefix + key).utf8)])
        let sent = out.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent != out.count else { return }
        close() // half a command would garble every later reply
    }

    private func fail() {
        pending.withLock { done in defer { done = nil }; return done }?(nil)
    }

    /// On `queue`: takes what arrived; once a whole bulk reply is in, answers the pending `GET`.
    /// The end of the connection or an error closes the link (a source left on a socket at its
    /// end would fire for ever).
    private func readAvailable() {
        var reply: (start: Int, length: Int)?
        while reply == nil {
            if have == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + have, $0.count - have, 0) }
            if count < 0 && (errno == EAGAIN || errno == EINTR) { return }
            guard count > 0 else { return close() }
            have += count
            reply = RawRedisClient.bulkReply(in: buffer, count: have)
        }
        guard let reply else { return }
        have = 0
        let value = reply.length < 0 ? nil : Data(buffer[reply.start..<reply.start + reply.length])
        pending.withLock { done in defer { done = nil }; return done }?(value)
    }
}
