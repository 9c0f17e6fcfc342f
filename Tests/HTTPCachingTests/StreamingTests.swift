import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Headers at once, the body as it arrives, memory bounded: a caching session streams like a
/// plain one.
@Suite("Streaming through the cache")
struct StreamingTests {
    /// The four ways a foreground request reaches the network and streams its answer.
    enum Scenario: String, CaseIterable, CustomTestStringConvertible {
        case miss, expired, bypass, revalidatedWith200
        var testDescription: String { rawValue }
    }

    /// Routes `/s` so that the request under test gets `stream`, after whatever the scenario
    /// needs stored first; returns the headers of the streamed answer.
    private func prepare(_ scenario: Scenario, _ h: Harness, stream: LoopbackOrigin.BodyStream,
                         seen: SeenHeaders) async throws {
        let streamed: [(name: String, value: String)] = scenario == .bypass
            ? [("Cache-Control", "no-store")] : [("Cache-Control", "max-age=600"), ("ETag", "\"new\"")]
        let storedFirst = scenario == .expired || scenario == .revalidatedWith200
        let first: LoopbackOrigin.Response = scenario == .revalidatedWith200
            ? .init(headers: [("Cache-Control", "max-age=60"), ("ETag", "\"old\"")], text: "old")
            : .init(headers: [("Cache-Control", "max-age=60")], text: "old")
        h.origin.route("/s") { request, hit in
            seen.record(request)
            return storedFirst && hit == 1 ? first : .init(headers: streamed, stream: stream)
        }
        if storedFirst {
            #expect(try await h.get("/s").text == "old")
            h.clock.advance(by: 3 * 86_400)
        }
    }

    @Test("a delegate gets the response while the origin still holds the body, then each chunk as it is sent",
          arguments: Scenario.allCases)
    func headersAtOnceBodyAsItArrives(scenario: Scenario) async throws {
        let h = try Harness(configuration: CacheConfiguration(errorFallbackWindow: nil))
        let stream = LoopbackOrigin.BodyStream()
        let seen = SeenHeaders()
        try await prepare(scenario, h, stream: stream, seen: seen)
        let probe = ProbeDelegate()
        let session = h.delegateSession(probe)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: h.origin.url("/s")).resume()

        #expect(await probe.wait { $0.response != nil }, "the response arrives with its headers")
        #expect(stream.ending == nil && stream.bytesSent == 0, "…while the origin has sent no body yet")
        let response = try #require(probe.value.response)
        #expect(response.statusCode == 200)
        #expect(response.cacheStatus == (scenario == .bypass ? .bypass : scenario == .miss ? .miss : .expired))
        var expected = Data()
        for index in 1...5 {
            let chunk = Data("chunk \(index) of the streamed body\n".utf8)
            stream.write(chunk)
            expected.append(chunk)
            let count = expected.count
            #expect(await probe.wait { $0.byteCount == count }, "chunk \(index) reaches the delegate before the next is sent")
            #expect(probe.value.completed == false)
        }
        stream.finish()
        let done = try #require(await probe.finished())
        #expect(done.error == nil)
        #expect(done.data == expected)
        #expect(done.chunks.count == 5, "one didReceive(data) per chunk the origin sent")
        #expect(done.order.first == "response" && done.order.last == "complete")

        let entry = h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/s")))
        if scenario == .bypass {
            #expect(entry == nil)
            #expect(h.recorder.count(.notStored(.responseNoStore)) == 1)
        } else {
            #expect(await h.recorder.wait(for: .stored, count: scenario == .miss ? 1 : 2))
            #expect(entry?.body == expected, "the cache kept the same bytes it streamed")
            #expect(entry?.header("ETag") == "\"new\"")
        }
        if scenario == .revalidatedWith200 {
            #expect(seen.all.last?.header("If-None-Match") == "\"old\"", "it was a revalidation")
        }
    }

    @Test("completion handlers and async data(for:) get a streamed body whole, exactly once", arguments: [false, true])
    func wholeBodyOnce(async: Bool) async throws {
        let h = try Harness()
        let stream = LoopbackOrigin.BodyStream()
        h.origin.route("/whole", response: .init(headers: [("Cache-Control", "max-age=600")], stream: stream))
        var expected = Data()
        // Many pieces, each on the wire before the next: the client reads them in many reads.
        let writer = Task {
            guard await stream.headersSent() else { return }
            for index in 0..<40 {
                let piece = Data(repeating: UInt8(ascii: "a") + UInt8(index % 26), count: 8_192)
                stream.write(piece)
                _ = await stream.flushed()
            }
            stream.finish()
        }
        for index in 0..<40 { expected.append(Data(repeating: UInt8(ascii: "a") + UInt8(index % 26), count: 8_192)) }
        let data: Data
        if async {
            data = try await h.session.data(for: URLRequest(url: h.origin.url("/whole"))).0
        } else {
            data = try await h.get("/whole").data
        }
        await writer.value
        #expect(data.count == expected.count)
        #expect(data == expected)
        #expect(h.cache.manage.cachedEntry(for: URLRequest(url: h.origin.url("/whole")))?.body == expected)
        // And from the store: the same bytes, once.
        let hit = async ? try await h.session.data(for: URLRequest(url: h.origin.url("/whole"))).0 : try await h.get("/whole").data
        #expect(hit == expected)
    }

    @Test("a response larger than the store's entry limit streams to a delegate in many chunks and is not stored",
          arguments: [false, true])
    func tooLargeStreams(announcesLength: Bool) async throws {
        let store = try MemoryResponseStore(byteLimit: 4 << 20, maxEntrySize: 256 << 10)
        let h = try Harness(store: store)
        let pieces = 64, size = 32 << 10
        let stream = LoopbackOrigin.BodyStream(framing: announcesLength ? .contentLength(pieces * size) : .chunked)
        h.origin.route("/big", response: .init(headers: [("Cache-Control", "max-age=600")], stream: stream))
        let probe = ProbeDelegate()
        let session = h.delegateSession(probe)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: h.origin.url("/big")).resume()
        #expect(await probe.wait { $0.response != nil })
        let piece = LoopbackOrigin.filler(count: size)
        for index in 1...pieces {
            stream.write(piece)
            #expect(await probe.wait { $0.byteCount == index * size })
        }
        stream.finish()
        let done = try #require(await probe.finished())
        #expect(done.error == nil && done.byteCount == pieces * size)
        #expect(done.chunks.count >= pieces)
        #expect(done.response?.cacheStatus == (announcesLength ? .bypass : .miss),
                "with Content-Length the cache knows at once; without, only past the limit")
        #expect(h.recorder.count { $0.notStoredReason?.name == "tooLarge" } == 1)
        #expect(h.recorder.count(.stored) == 0 && h.cache.entryCount == 0)
    }

    @Test("server-sent events reach a delegate as they are pushed, with or without the cache, and end when the client cancels",
          arguments: [true, false])
    func serverSentEvents(caching: Bool) async throws {
        let h = try Harness()
        let stream = LoopbackOrigin.BodyStream()
        h.origin.route("/events", response: .eventStream(stream))
        let probe = ProbeDelegate()
        let session = h.session(caching: caching, probe)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: h.origin.url("/events"))
        task.resume()
        #expect(await probe.wait { $0.response != nil })
        var expected = ""
        for index in 1...4 {
            stream.writeEvent(data: "tick \(index)", id: "\(index)")
            expected += "id: \(index)\ndata: tick \(index)\n\n"
            let text = expected
            #expect(await probe.wait { String(decoding: $0.data, as: UTF8.self) == text }, "event \(index) arrives as pushed")
        }
        #expect(probe.value.completed == false, "the stream never ends by itself")
        task.cancel()
        let done = try #require(await probe.finished())
        #expect(errorCode(done.error) == NSURLErrorCancelled)
        #expect(await stream.ended() == .clientClosed, "cancelling closes the origin's connection")
        #expect(done.chunks.count == 4)
        if caching {
            #expect(h.recorder.count(.notStored(.responseNoStore)) == 1)
            #expect(h.cache.entryCount == 0)
        }
    }

    @Test("a long poll held by the origin answers the caller when the origin lets it go, not before")
    func longPoll() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        var held = LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], text: "news")
        held.headGate = gate
        h.origin.route("/poll", response: held)
        let probe = ProbeDelegate()
        let session = h.delegateSession(probe)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: h.origin.url("/poll")).resume()
        #expect(await gate.reached())
        #expect(probe.value.response == nil && probe.value.completed == false)
        gate.open()
        let done = try #require(await probe.finished())
        #expect(String(decoding: done.data, as: UTF8.self) == "news")
        #expect(done.response?.cacheStatus == .bypass)
    }

    /// Under a sanitizer, where every byte costs many times more, 24 MB: still past the
    /// store's 8 MB entry limit and over a thousand chunks, checked for memory errors and races.
    @Test("100 MB through a delegate session: thousands of chunks, the response first, memory bounded, nothing stored",
          .timeLimit(.minutes(2)))
    func hundredMegabytes() async throws {
        let size = underSanitizer ? 24 << 20 : 100 << 20
        let lines = try runTransparencyProbe(["stream", "\(size)"])
        let values = probeValues(lines)
        #expect(values["bytes"] == size)
        #expect((values["chunks"] ?? 0) > 1_000, "delivered as it arrives, not as one chunk")
        #expect(values["response-before-body-end"] == 1)
        #expect(values["not-stored-too-large"] == 1 && values["stored"] == 0)
        if !underSanitizer {
            #expect((values["peak-growth-kb"] ?? .max) < 48 << 10, "the cache never holds the body whole: \(lines)")
        }
    }
}

/// Runs `transparency-probe` with arguments and returns its output lines.
func runTransparencyProbe(_ arguments: [String]) throws -> [String] {
    try runProbe("transparency-probe", arguments)
}

/// Runs one of the package's probe programs in a new process, expects it to exit 0, and
/// returns its output lines.
func runProbe(_ name: String, _ arguments: [String]) throws -> [String] {
    let process = try ChildProcess(builtExecutable(named: name).path, arguments, output: .pipe, errors: .inherit)
    let output = process.output!.readDataToEndOfFile()
    _ = process.waitForExit(timeout: .infinity)
    #expect(process.exitStatus == 0, "\(name) \(arguments) ended with \(process.exitStatus.map { "status \($0)" } ?? "signal \(process.terminatingSignal ?? 0)")")
    return String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// The "name number" lines of a probe's output, as a dictionary.
func probeValues(_ lines: [String]) -> [String: Int] {
    Dictionary(lines.compactMap { line -> (String, Int)? in
        let parts = line.split(separator: " ")
        guard parts.count == 2, let value = Int(parts[1]) else { return nil }
        return (String(parts[0]), value)
    }, uniquingKeysWith: { _, last in last })
}

/// Whether this process runs under AddressSanitizer or ThreadSanitizer (CI runs the suite
/// under both). Their allocators keep freed memory back (ASan's quarantine holds 256 MB) and
/// add shadow memory, so a bound on resident memory measures the sanitizer, not the cache:
/// those bounds are checked in the plain run.
let underSanitizer: Bool = ["__asan_init", "__tsan_init"].contains { (name: String) in dlsym(nil, name) != nil }
