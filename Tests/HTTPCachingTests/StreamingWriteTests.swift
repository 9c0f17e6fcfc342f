import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// A storable body streamed to a delegate reaches the store as it arrives: a disk store writes
/// it to its temporary file part by part, and nothing holds it whole.
@Suite("Streaming writes: the body goes to the store as it arrives")
struct StreamingWriteTests {
    @Test("the checksum of a body in parts is the checksum of the whole, however it is cut", arguments: [1, 7, 127, 128, 129, 4096, 65_537])
    func runningChecksum(part: Int) {
        var generator = SeededGenerator(seed: UInt64(part))
        let body = Data((0..<200_003).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var running = BodyChecksum.Running()
        var offset = 0
        while offset < body.count {
            let size = min(body.count - offset, Int.random(in: 1...part, using: &generator))
            body[offset..<(offset + size)].withUnsafeBytes { running.update($0) }
            offset += size
        }
        #expect(running.finish() == body.withUnsafeBytes { BodyChecksum.checksum($0) })
    }

    @Test("a disk writer's file is removed on abort, and nothing is left of a writer never committed")
    func diskWriterLeavesNoTrace() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        func files() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: store.files.path).count }
        let before = try files()
        let url = URL(string: "http://example.test/a")!
        let writer = try store.makeWriter(for: CacheKey(url: url))
        try writer.append(Data(count: 100_000))
        #expect(try files() == before + 1, "the part went to a temporary file")
        writer.abort()
        #expect(try files() == before)
        #expect(store.entryCount == 0)
    }

    @Test("a large storable answer streamed to a delegate through a disk store is stored whole, and served whole next time")
    func largeAnswerThroughDisk() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: try DiskResponseStore(directory: directory.url, maxEntrySize: 32 << 20))
        let body = LoopbackOrigin.filler(count: 6 << 20)
        h.origin.route("/big", response: .init(headers: [("Cache-Control", "max-age=600"), ("ETag", "\"b\"")], body: body))
        let probe = ProbeDelegate(onWillCache: { proposed, answer in
            // As Alamofire's ResponseCacher.modify: a new response, the same data.
            let old = proposed.response as! HTTPURLResponse
            var fields = old.headerFields
            fields["X-Kept"] = "yes"
            let response = HTTPURLResponse(url: old.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields)!
            answer(CachedURLResponse(response: response, data: proposed.data, userInfo: nil, storagePolicy: .allowed))
        })
        // 6 MB through a disk store while the whole suite runs: the timeout is only a guard against a hang.
        let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/big")), probe: probe, timeout: 60) { h.delegateSession($0) })
        #expect(outcome.data == body && probe.value.chunks.count > 1)
        #expect(probe.value.cacheQuestions.first?.data.count == body.count, "the delegate was shown the whole body written")
        let again = try await h.get("/big")
        #expect(again.status == .fresh && again.data == body && again.response.value(forHTTPHeaderField: "X-Kept") == "yes")
        #expect(h.origin.requestCount("/big") == 1)
    }

    @Test("a refresh streams its answer to the store; a changed body says so")
    func refreshStreams() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 10, usable: 100)),
                            store: try DiskResponseStore(directory: directory.url))
        h.origin.route("/r") { _, hit in .init(body: LoopbackOrigin.filler(count: 300_000 + hit)) }
        _ = try await h.get("/r")
        h.clock.advance(by: 20)
        #expect(try await h.get("/r").status == .stale)
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        #expect(try await h.get("/r").data.count == 300_002)
    }
}
