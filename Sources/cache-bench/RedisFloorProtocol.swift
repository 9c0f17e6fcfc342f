import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The least any URLProtocol can pay to answer from Redis: the floor protocol's canned
/// answer, with its body read by one `GET` of a value of the same size, and nothing else (no
/// key derivation, no pool, no decoding, no checks).
///
/// Two ways, each a bound for a Redis hit through URLSession:
/// - `inline` (the `rinline` column): the `GET` on the loading thread, Foundation's shared
///   queue, blocking it for the round trip. The absolute floor; the cache may not do this.
/// - `source` (the `rsource` column): the `GET` sent without waiting from the loading thread,
///   its reply read by a dispatch read source and the answer handed to the client from the
///   source's queue. Never waits on Foundation's queue and adds no queue hop of its own, so no
///   design that never waits there can beat it (it does not even take the hop back to the
///   task's work queue that a real cache needs for its client calls).
///
/// For sequential requests only (one request in flight): a bench, not a client.
final class RedisFloorProtocol: URLProtocol {
    /// The connections, set before any request.
    nonisolated(unsafe) static var link: RedisFloorLink?

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let url = request.url, let link = Self.link, let key = RedisFloorLink.key(of: url) else {
            client?.urlProtocol(self, didFailWithError: URLError(.badURL))
            return
        }
        if url.path.hasPrefix("/rinline/") {
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

/// The two connections `RedisFloorProtocol` reads through: one blocking (`RawRedisClient`),
/// one non-blocking watched by a read source.
final class RedisFloorLink: @unchecked Sendable {
    private let blocking: RawRedisClient
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
        fd = try RawRedisClient.connect(port: port)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [unowned self] in readAvailable() }
        source.resume()
    }

    deinit {
        source.cancel()
        close(fd)
    }

    /// The raw key a floor URL names: `/r…/BYTES?k=K` is `RedisBench.rawKey(BYTES, K)`.
    static func key(of url: URL) -> String? {
        guard let bytes = Int(url.lastPathComponent),
              let k = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first(where: { $0.name == "k" })?.value.flatMap(Int.init)
        else { return nil }
        return RedisBench.rawKey(bytes, k)
    }

    func blockingGet(_ key: String) -> Data? {
        try? blocking.value(key)
    }

    /// Sends `GET key` without waiting; `done` gets the value on the source's queue.
    func sourceGet(_ key: String, _ done: @escaping @Sendable (Data?) -> Void) {
        pending.withLock { $0 = done }
        let out = RawRedisClient.command([Array("GET".utf8), Array((prefix + key).utf8)])
        let sent = out.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent != out.count else { return }
        pending.withLock { done in defer { done = nil }; return done }?(nil)
    }

    /// On `queue`: takes what arrived; once a whole bulk reply is in, answers the pending `GET`.
    private func readAvailable() {
        while true {
            if have == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + have, $0.count - have, 0) }
            guard count > 0 else { break }
            have += count
        }
        guard let reply = RawRedisClient.bulkReply(in: buffer, count: have) else { return }
        have = 0
        let value = reply.length < 0 ? nil : Data(buffer[reply.start..<reply.start + reply.length])
        pending.withLock { done in defer { done = nil }; return done }?(value)
    }
}
