import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// The embedded origin `cache-demo fetch /path` asks, on 127.0.0.1 at a port of its own.
enum DemoOrigin {
    /// Starts an origin answering `path`, whatever the method, with what it received and how
    /// many requests it has had: `QUERY /search {"q":1} (origin request 1)`, `Cache-Control:
    /// max-age=60` and an `ETag` of the method and body, answering 304 when `If-None-Match`
    /// names it; with `ranged` (`--partial`), a GET gets `mediaFile` instead, a `Range` answered
    /// with 206 or 416 (`LoopbackOrigin.rangedResponse`). Nil (the reason printed) if it cannot start.
    static func start(path: String, ranged: Bool = false) -> LoopbackOrigin? {
        guard let origin = make() else { return nil }
        origin.route(path) { request, hit in
            if ranged && request.method == "GET" {
                return LoopbackOrigin.rangedResponse(to: request, representation: mediaFile, etag: "\"\(fingerprint(mediaFile))\"",
                                                     fields: [("Content-Type", "text/plain"), ("Cache-Control", "max-age=60")])
            }
            let etag = "\"\(fingerprint(Data(request.method.utf8) + [0] + request.body))\""
            if request.header("If-None-Match") == etag { return .init(status: 304, headers: [("ETag", etag)]) }
            let body = request.body.isEmpty ? "" : " " + String(decoding: request.body, as: UTF8.self)
            return .init(headers: [("Content-Type", "text/plain"), ("Cache-Control", "max-age=60"), ("ETag", etag)],
                         text: "\(request.method) \(request.target)\(body) (origin request \(hit))")
        }
        return origin
    }

    /// What `--partial` serves: 64 KiB of numbered lines (`line 0001 of 2048` and so on,
    /// 32 bytes each), the same in every run.
    static let mediaFile = Data((1...2048).map { String(format: "line %04d of 2048 -------------\n", $0) }.joined().utf8)

    /// A key rewriter that names the origin `demo-origin` instead of `127.0.0.1:<port>`: the
    /// port changes from run to run, and a second run over a disk store finds the first run's
    /// entries under the same keys. A keyed body's digest is added after the rewriter, so it
    /// stays part of the key.
    static func stableKeys(port: Int) -> @Sendable (CacheKey, URLRequest) -> CacheKey {
        { key, _ in
            CacheKey(method: key.method, normalizedURL: key.url.replacingOccurrences(of: "127.0.0.1:\(port)", with: "demo-origin"))
        }
    }

    /// A 64-bit FNV-1a hash of the bytes, 16 hex digits: the same bytes, the same value, in
    /// every run.
    static func fingerprint(_ bytes: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(format: "%016llx", hash)
    }

    /// A loopback origin with no routes yet; nil (the reason printed) if it cannot start.
    static func make() -> LoopbackOrigin? {
        do {
            return try LoopbackOrigin()
        } catch {
            Output.error("cannot start the embedded origin: \(error)")
            return nil
        }
    }
}
