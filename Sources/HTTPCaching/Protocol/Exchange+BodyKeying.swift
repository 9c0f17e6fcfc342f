import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Starts a request whose body is keyed (`BodyKeying`), on the I/O queue: reads its body
    /// once (a stream or a file into memory), digests it into the key, looks the entry up and
    /// starts. A body larger than `maxBodySize` is not keyed: the request passes through.
    func beginKeyed(_ caller: Caller, body: HopBody) {
        prepareForNetwork(caller)
        let request = state.withLock { $0.hop.request }
        cache.ioQueue(for: request.url?.absoluteString ?? "").async {
            let keying = self.cache.configuration.bodyKeying
            let read = Self.read(body, limit: keying.maxBodySize)
            if case .unreadable = read { return caller.delivery.fail(HTTPCachingError.uploadBodyUnavailable) }
            let hop = self.state.withLock { state -> Hop in
                if case .keyed(let bytes) = read {
                    state.hop.body = .data(bytes)
                    state.hop.bodyDigest = keying.digest(of: bytes, headers: state.hop.headers)
                } else if case .notKeyed(let body, _) = read {
                    state.hop.body = body
                }
                // A request's own stream, read: its bytes go as a stream again, as the caller sent them.
                if case .stream = body, case .data(let bytes) = state.hop.body { state.hop.body = .readStream(bytes) }
                return state.hop
            }
            guard let digest = hop.bodyDigest else { // not keyed: it passes through
                if case .notKeyed(_, let bytes?) = read {
                    self.run([.emit(.notStored(.bodyTooLargeToKey(bytes: bytes, limit: keying.maxBodySize)))])
                }
                return self.start(key: hop.key, entry: nil, otherVariant: false)
            }
            guard let key = try? self.binding.key(for: hop.request, bodyDigest: digest) else {
                return self.start(key: hop.key, entry: nil, otherVariant: false, storeUnavailable: true)
            }
            let (entry, other) = self.cache.lookup(key, headers: hop.headers)
            self.start(key: key, entry: entry, otherVariant: other)
        }
    }

    /// The digest a redirected or retried hop's body adds to its key, when it is keyed.
    func bodyDigest(of request: URLRequest, body: HopBody) -> String? {
        let keying = cache.configuration.bodyKeying
        guard keying.applies(to: request), let bytes = body.bytes, bytes.count <= keying.maxBodySize else { return nil }
        return keying.digest(of: bytes, headers: binding.keys.headers(request))
    }

    /// What reading a body to key it found.
    enum KeyedBodyRead {
        /// Its bytes, no more than the limit: keyed.
        case keyed(Data)
        /// Not keyed: sent as this, larger than the limit by this many bytes (nil: a body the
        /// delegate supplies, unknown here).
        case notKeyed(HopBody, bytes: Int?)
        /// A stream that failed, or a file that cannot be read.
        case unreadable
    }

    /// Reads a body to key it: a stream to its end (into memory, even past the limit, since it
    /// cannot be read twice), a file only when it is within the limit.
    static func read(_ body: HopBody, limit: Int) -> KeyedBodyRead {
        let bytes: Data
        switch body {
        case .none: bytes = Data()
        case .data(let data), .readStream(let data): bytes = data
        case .fromDelegate, .delegateStream: return .notKeyed(body, bytes: nil)
        case .file(let url):
            guard let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? Int else { return .unreadable }
            if size > limit { return .notKeyed(body, bytes: size) }
            guard let data = try? Data(contentsOf: url) else { return .unreadable }
            bytes = data
        case .stream(let stream):
            guard let data = readToEnd(stream) else { return .unreadable }
            bytes = data
        }
        return bytes.count <= limit ? .keyed(bytes) : .notKeyed(.data(bytes), bytes: bytes.count)
    }

    private static func readToEnd(_ stream: InputStream) -> Data? {
        if stream.streamStatus == .notOpen { stream.open() }
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count < 0 { return nil }
            if count == 0 { return data }
            data.append(contentsOf: buffer[..<count])
        }
    }
}
