import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Testing
import LoopbackOrigin

@Suite("Loopback origin: streams, gates, server-sent events, stop, pacing")
struct LoopbackOriginCapabilityTests {
    @Test("a chunked stream: the client sees the headers before any body is written, then each chunk as written")
    func chunkedStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/stream", response: .init(headers: [("Content-Type", "text/plain"), ("X-Test", "1")], stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/stream"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await stream.headersSent())
        #expect(await recorder.waitForResponse())
        #expect(stream.bytesSent == 0 && recorder.dataEvents == 0, "the response arrived while the body was unwritten")
        #expect(recorder.response?.value(forHTTPHeaderField: "X-Test") == "1")

        stream.write("one,")
        #expect(await recorder.waitForBody(containing: "one,"))
        #expect(recorder.completion == nil, "the task is still open after the first chunk")
        stream.write("two")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil))
        #expect(recorder.text == "one,two")
        #expect(await stream.ended() == .finished)
        #expect(stream.bytesSent == 7)
    }

    @Test("a Content-Length stream: the announced length, written in parts the client sees one by one")
    func contentLengthStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: .contentLength(6))
        origin.route("/sized", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/sized"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await recorder.waitForResponse())
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Length") == "6")
        stream.write("abc")
        #expect(await recorder.waitForBody(containing: "abc"))
        #expect(recorder.completion == nil)
        stream.write("def")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil) && recorder.text == "abcdef")
        #expect(await stream.ended() == .finished)
    }

    @Test("a Content-Length stream finished short closes the connection: the client gets an error")
    func shortStream() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: .contentLength(10))
        origin.route("/short", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/short"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await stream.headersSent())
        stream.write("abc")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion != .some(nil), "a body shorter than its Content-Length is an error")
        #expect(await origin.openConnections(atMost: 0))
    }

    @Test("a body gate: the client has the response while the origin still holds the body")
    func bodyGate() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        var response = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "held body")
        response.bodyGate = gate
        origin.route("/gated", response: response)
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/gated"), recorder: recorder)
        defer { session.invalidateAndCancel() }

        #expect(await gate.reached())
        #expect(await recorder.waitForResponse())
        #expect(!gate.isOpen && recorder.dataEvents == 0, "didReceive(response) happened while the body was held")
        gate.open()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.text == "held body")
        #expect(gate.arrivals == 1)
    }

    @Test("a head gate: nothing reaches the client until it opens; it holds several responses at once")
    func headGate() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        origin.route("/held") { _, hit in
            var response = LoopbackOrigin.Response(text: "answer \(hit)")
            response.headGate = gate
            return response
        }
        let first = TaskRecorder(), second = TaskRecorder()
        let sessions = [startTask(origin.url("/held?a"), recorder: first), startTask(origin.url("/held?b"), recorder: second)]
        defer { sessions.forEach { $0.invalidateAndCancel() } }

        #expect(await gate.reached(count: 2))
        #expect(!first.sawResponse && !second.sawResponse, "the origin has written nothing yet")
        gate.open()
        #expect(await first.waitForCompletion())
        #expect(await second.waitForCompletion())
        #expect(Set([first.text, second.text]) == ["answer 1", "answer 2"])
    }

    @Test("server-sent events: pushed when the test wants; the origin sees the client leave", arguments: [
        LoopbackOrigin.BodyStream.Framing.chunked, .untilClose,
    ])
    func eventStreamClientLeaves(framing: LoopbackOrigin.BodyStream.Framing) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream(framing: framing)
        origin.route("/events", response: .eventStream(stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/events"), recorder: recorder)

        #expect(await recorder.waitForResponse())
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Type") == "text/event-stream")
        #expect(recorder.response?.value(forHTTPHeaderField: "Cache-Control") == "no-store")
        #expect(recorder.response?.value(forHTTPHeaderField: "Content-Length") == nil)
        stream.writeEvent(data: "first", id: "1")
        #expect(await recorder.waitForBody(containing: "id: 1\ndata: first\n\n"))
        stream.writeEvent(data: "two\nlines", event: "update")
        #expect(await recorder.waitForBody(containing: "event: update\ndata: two\ndata: lines\n\n"))
        #expect(stream.ending == nil)

        session.invalidateAndCancel() // the client goes away
        #expect(await stream.ended() == .clientClosed)
        #expect(await origin.openConnections(atMost: 0))
        stream.write("ignored after the end")
    }

    @Test("server-sent events: the stream ends when the test finishes it")
    func eventStreamFinished() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/events", response: .eventStream(stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/events"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForResponse())
        stream.writeEvent(data: "only")
        stream.finish()
        #expect(await recorder.waitForCompletion())
        #expect(recorder.completion == .some(nil) && recorder.text == "data: only\n\n")
        #expect(await stream.ended() == .finished)
    }

    @Test("stop() ends held, streaming, paced and hanging responses, closes their connections and leaves no thread")
    func stopEndsEverything() async throws {
        let origin = try LoopbackOrigin()
        let gate = LoopbackOrigin.Gate(), stream = LoopbackOrigin.BodyStream()
        var gated = LoopbackOrigin.Response(text: "never")
        gated.bodyGate = gate
        origin.route("/gated", response: gated)
        origin.route("/stream", response: .eventStream(stream))
        origin.route("/paced", response: .paced(bytes: 1 << 20, bytesPerSecond: 1024))
        origin.route("/hang", response: .init(fault: .hang))
        let recorders = (0..<4).map { _ in TaskRecorder() }
        let sessions = zip(["/gated", "/stream", "/paced", "/hang"], recorders).map { startTask(origin.url($0), recorder: $1) }
        defer { sessions.forEach { $0.invalidateAndCancel() } }
        #expect(await gate.reached())
        #expect(await stream.headersSent())
        #expect(await recorders[2].waitForResponse())
        #expect(await origin.requests("/hang", count: 1))
        #expect(origin.openConnections == 4)

        origin.stop()
        #expect(origin.openConnections == 0)
        #expect(origin.runningThreads == 0)
        #expect(stream.ending == .originStopped)
        for recorder in recorders { #expect(await recorder.waitForCompletion()) }
        #expect(recorders[0].completion != .some(nil) && recorders[2].completion != .some(nil))
        origin.stop() // twice is fine
    }

    @Test("a handler may stop its own origin without waiting for itself")
    func stopFromHandler() async throws {
        let origin = try LoopbackOrigin()
        origin.route("/stop") { [weak origin] _, _ in
            origin?.stop()
            return .init(text: "stopping")
        }
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/stop"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await recorder.waitForCompletion())
        #expect(await origin.openConnections(atMost: 0))
        origin.stop()
        #expect(origin.runningThreads == 0)
    }

    @Test("a paced body arrives whole, and no faster than its pace")
    func paced() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let size = 48 * 1024, rate = 256 * 1024, chunk = 4096
        origin.route("/paced", response: .paced(bytes: size, bytesPerSecond: rate, chunkSize: chunk))
        let start = Date()
        let (text, response) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url("/paced"))
        let elapsed = Date().timeIntervalSince(start)
        #expect(response.value(forHTTPHeaderField: "Content-Length") == String(size))
        #expect(Data(text.utf8) == LoopbackOrigin.filler(count: size))
        // A lower bound only: pacing can make a body slower than this, never faster.
        #expect(elapsed >= Double(size - chunk) / Double(rate) * 0.9)
    }

    @Test("a stream serves one response: a second request given the same stream gets a 500")
    func streamIsSingleUse() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let stream = LoopbackOrigin.BodyStream()
        origin.route("/once", response: .init(stream: stream))
        let recorder = TaskRecorder()
        let session = startTask(origin.url("/once"), recorder: recorder)
        defer { session.invalidateAndCancel() }
        #expect(await stream.headersSent())
        let (_, second) = try await fetchPlain(URLSession(configuration: .ephemeral), origin.url("/once"))
        #expect(second.statusCode == 500)
        stream.finish()
        #expect(await recorder.waitForCompletion())
    }
}
