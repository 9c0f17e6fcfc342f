import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Testing
@testable import HTTPCaching

/// Partial content through URLSession against the loopback origin (RFC 9111 sections 3.3 and
/// 3.4, RFC 9110 section 14): 206 answers stored as parts, combined, served as ranges and as
/// the whole, revalidated together, replaced when the representation changes.
@Suite("Partial content, end to end")
struct PartialContentEndToEndTests {
    /// A representation of `count` bytes, each its offset modulo 251 (a prime: no period a
    /// range could hide a wrong offset in).
    static func representation(_ count: Int, salt: UInt8 = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 % 251) &+ salt })
    }

    static let partial = CacheConfiguration(storesPartialContent: true)

    static func ranged(_ h: Harness, _ range: String?) async throws -> FetchResult {
        try await h.get("/media", headers: range.map { ["Range": $0] } ?? [:])
    }

    /// What a caller observed of one answer: status, Content-Range and body.
    struct Observed: Equatable, CustomStringConvertible {
        let status: Int
        let contentRange: String?
        let body: Data
        init(_ result: FetchResult) {
            status = result.response.statusCode
            contentRange = result.response.value(forHTTPHeaderField: "Content-Range")
            body = result.data
        }
        var description: String { "\(status) \(contentRange ?? "-") \(body.count) bytes" }
    }

    /// A media player's reads of a 256 KB file: four 64 KB ranges, a seek back over them, a
    /// range inside one, then the whole file.
    static let playerRanges: [String?] = [
        "bytes=0-65535", "bytes=65536-131071", "bytes=131072-196607", "bytes=196608-",
        "bytes=0-65535", "bytes=65536-131071", "bytes=131072-196607", "bytes=196608-",
        "bytes=1000-1999", nil,
    ]

    @Test("a media player's ranges: each range fetched once, later ones from the parts (206), the whole from them once complete (200); what the caller sees is what the origin sends")
    func mediaPlayer() async throws {
        let body = Self.representation(256 << 10)
        let fields: [(name: String, value: String)] = [("Cache-Control", "max-age=3600"), ("Content-Type", "video/mp4")]
        let cached = try Harness(configuration: Self.partial)
        cached.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: fields)
        let plain = try LoopbackOrigin()
        defer { plain.stop() }
        plain.routeRanged("/media", representation: body, etag: "\"v1\"", fields: fields)
        let plainSession = URLSession(configuration: .ephemeral)
        defer { plainSession.finishTasksAndInvalidate() }

        for (index, range) in Self.playerRanges.enumerated() {
            var request = URLRequest(url: plain.url("/media"))
            if let range { request.setValue(range, forHTTPHeaderField: "Range") }
            let expected = Observed(try await fetch(plainSession, request))
            let result = try await Self.ranged(cached, range)
            #expect(Observed(result) == expected, "request \(index) (\(range ?? "whole"))")
            let status = result.response.value(forHTTPHeaderField: "Cache-Status") ?? ""
            let forwarded = index == 0 ? "fwd=uri-miss; fwd-status=206" : "fwd=partial; fwd-status=206"
            #expect(index < 4 ? status.contains(forwarded) && status.hasSuffix("stored") : status.hasPrefix("HTTPCaching; hit"),
                    "request \(index): \(status)")
        }
        #expect(plain.requestCount("/media") == Self.playerRanges.count)
        #expect(cached.origin.requestCount("/media") == 4, "the four first ranges, and nothing after them")
        #expect(cached.origin.requests(for: "/media").map { $0.header("Range") } == Array(Self.playerRanges.prefix(4)))
        #expect(cached.recorder.count(.stored) == 4)
    }

    @Test("parts with gaps: a range across a gap goes to the origin and fills it; a range past the end is 416 from the parts")
    func gapsAndPastTheEnd() async throws {
        let body = Self.representation(1000)
        let h = try Harness(configuration: Self.partial)
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        _ = try await Self.ranged(h, "bytes=0-99")
        _ = try await Self.ranged(h, "bytes=200-299")
        let across = try await Self.ranged(h, "bytes=50-250")
        #expect(across.response.statusCode == 206 && across.data == body.subdata(in: 50..<251))
        #expect(h.origin.requestCount("/media") == 3)
        let inside = try await Self.ranged(h, "bytes=0-299")
        #expect(inside.response.statusCode == 206 && inside.data == body.subdata(in: 0..<300) && inside.status == .fresh)
        let past = try await Self.ranged(h, "bytes=5000-")
        #expect(past.response.statusCode == 416 && past.response.value(forHTTPHeaderField: "Content-Range") == "bytes */1000")
        #expect(h.origin.requestCount("/media") == 3, "the held range and the 416 came from the parts")
        let whole = try await Self.ranged(h, nil)
        #expect(whole.response.statusCode == 200 && whole.data == body)
        #expect(h.origin.requestCount("/media") == 4, "the parts do not hold it all: the bytes they lack are fetched, completing them")
        _ = try await Self.ranged(h, "bytes=900-999")
        #expect(h.origin.requestCount("/media") == 4, "a range of the stored whole")
    }

    @Test("stale parts are revalidated together: one conditional range request, a 304 serves the range from them and refreshes them")
    func revalidatedTogether() async throws {
        let body = Self.representation(1000)
        let h = try Harness(configuration: Self.partial)
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=60")])
        _ = try await Self.ranged(h, "bytes=0-99")
        _ = try await Self.ranged(h, "bytes=500-599")
        h.clock.advance(by: 120)
        let revalidated = try await Self.ranged(h, "bytes=510-519")
        #expect(revalidated.response.statusCode == 206 && revalidated.data == body.subdata(in: 510..<520))
        #expect(revalidated.status == .revalidated)
        let sent = h.origin.requests(for: "/media").last
        #expect(sent?.header("If-None-Match") == "\"v1\"" && sent?.header("Range") == "bytes=510-519")
        let other = try await Self.ranged(h, "bytes=0-9")
        #expect(other.status == .fresh && other.data == body.subdata(in: 0..<10), "the other span was refreshed with it")
        #expect(h.origin.requestCount("/media") == 3)
    }

    @Test("a part of a changed representation (another ETag) replaces the parts: no byte of the old one is served with the new")
    func changedRepresentation() async throws {
        let first = Self.representation(1000), second = Self.representation(1000, salt: 7)
        let h = try Harness(configuration: Self.partial)
        h.origin.route("/media") { request, hit in
            LoopbackOrigin.rangedResponse(to: request, representation: hit == 1 ? first : second,
                                          etag: hit == 1 ? "\"v1\"" : "\"v2\"", fields: [("Cache-Control", "max-age=3600")])
        }
        _ = try await Self.ranged(h, "bytes=0-99")
        let next = try await Self.ranged(h, "bytes=100-199")
        #expect(next.data == second.subdata(in: 100..<200))
        let again = try await Self.ranged(h, "bytes=0-199")
        #expect(again.data == second.subdata(in: 0..<200), "the v1 part is not combined with the v2 one")
        #expect(h.origin.requestCount("/media") == 3)
    }

    @Test("a 206 that cannot be a part (no complete length, a Content-Range its body does not match) is passed through, not stored")
    func unusableParts() async throws {
        let h = try Harness(configuration: Self.partial)
        h.origin.route("/media") { _, hit in
            let range = hit <= 2 ? "bytes 0-9/*" : "bytes 0-19/100"
            return LoopbackOrigin.Response(status: 206, headers: [("Cache-Control", "max-age=3600"), ("Content-Range", range)],
                                           body: Data(repeating: 1, count: 10))
        }
        for _ in 0..<4 {
            let result = try await Self.ranged(h, "bytes=0-9")
            #expect(result.response.statusCode == 206 && result.data.count == 10)
        }
        #expect(h.origin.requestCount("/media") == 4)
        #expect(h.recorder.count(where: { $0.notStoredReason?.name == "unusablePart" }) == 4)
    }

    @Test("off by default: a 206 passes through and nothing of it is stored, as before")
    func offByDefault() async throws {
        let body = Self.representation(1000)
        let h = try Harness()
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        for _ in 0..<2 {
            let result = try await Self.ranged(h, "bytes=0-99")
            #expect(result.response.statusCode == 206 && result.data == body.subdata(in: 0..<100) && result.status == .bypass)
        }
        #expect(h.origin.requestCount("/media") == 2 && h.recorder.count(.stored) == 0)
    }

    @Test("a client that never sends Range: the same answers and the same origin requests with storesPartialContent on as off")
    func transparentWithoutRange() async throws {
        var observed: [[String]] = []
        for configuration in [CacheConfiguration(), Self.partial] {
            let h = try Harness(configuration: configuration)
            h.origin.routeRanged("/media", representation: Self.representation(1000), etag: "\"v1\"",
                                 fields: [("Cache-Control", "max-age=60")])
            var seen: [String] = []
            for step in 0..<4 {
                if step == 2 { h.clock.advance(by: 120) }
                let result = try await Self.ranged(h, nil)
                seen.append("\(Observed(result)) \(result.response.value(forHTTPHeaderField: "Cache-Status") ?? "")")
                if step == 2 { #expect(await h.recorder.wait(for: .refreshed(bodyChanged: false)), "the stale hit's refresh") }
            }
            seen.append("origin: " + h.origin.requests(for: "/media").map { $0.header("If-None-Match") ?? "-" }.joined(separator: ","))
            observed.append(seen)
        }
        #expect(observed[0] == observed[1])
        #expect(observed[0].last == "origin: -,\"v1\"")
    }

    @Test("parts in a disk store are combined and read back by a new cache on the same directory")
    func diskStore() async throws {
        let directory = TemporaryDirectory()
        let body = Self.representation(1000)
        let h = try Harness(configuration: Self.partial, store: try DiskResponseStore(directory: directory.url))
        h.origin.routeRanged("/media", representation: body, etag: "\"v1\"", fields: [("Cache-Control", "max-age=3600")])
        _ = try await Self.ranged(h, "bytes=0-99")
        _ = try await Self.ranged(h, "bytes=300-399")
        (h.cache.store as? DiskResponseStore)?.close()

        let cache = HTTPCache(configuration: Self.partial, store: try DiskResponseStore(directory: directory.url), now: h.clock.closure)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: h.origin.url("/media"))
        request.setValue("bytes=320-339", forHTTPHeaderField: "Range")
        let result = try await fetch(session, request)
        #expect(result.response.statusCode == 206 && result.data == body.subdata(in: 320..<340) && result.status == .fresh)
        #expect(result.response.value(forHTTPHeaderField: "Content-Range") == "bytes 320-339/1000")
        #expect(h.origin.requestCount("/media") == 2)
    }
}
