import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// A download delegate that records what a download task reports, reading the file while it
/// is still there (inside `didFinishDownloadingTo`).
final class DownloadProbe: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
    struct State: @unchecked Sendable {
        var written: [(Int64, Int64, Int64)] = []
        var file: Data?
        var completed = false
        var error: (any Error)?
        var redirects: [String] = []
        var order: [String] = []
        var response: HTTPURLResponse?

        var errorCode: Int? { error.map { ($0 as NSError).code } }
    }

    let state = Watched(State())
    var value: State { state.value }

    func finished(timeout: TimeInterval = 10) async -> State? {
        await state.wait(timeout: timeout) { $0.completed } ? value : nil
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let contents = try? Data(contentsOf: location)
        try? FileManager.default.removeItem(at: location) // Foundation 6.3.1 leaves it in the temporary directory
        state.update {
            $0.file = contents
            $0.order.append("file")
        }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        state.update {
            $0.written.append((bytesWritten, totalBytesWritten, totalBytesExpectedToWrite))
            if $0.order.last != "write" { $0.order.append("write") }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        state.update {
            $0.redirects.append(request.url?.path ?? "")
            $0.order.append("redirect")
        }
        completionHandler(request)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        state.update {
            $0.error = error
            $0.response = task.response as? HTTPURLResponse
            $0.completed = true
            $0.order.append("complete")
        }
    }
}

/// What a completion-handler download gave its handler.
struct DownloadOutcome: @unchecked Sendable {
    var file: Data?
    var response: HTTPURLResponse?
    var error: (any Error)?
}

@Suite("Download tasks run on Foundation's own HTTP class, on the caller's task")
struct DownloadTaskTests {
    static var body: Data { LoopbackOrigin.filler(count: 200_000) }

    func routes(_ origin: LoopbackOrigin) {
        origin.route("/file") { _, hit in .init(headers: [("Cache-Control", "max-age=600"), ("ETag", "\"\(hit)\"")], body: Self.body) }
        origin.route("/private") { _, _ in .init(headers: [("Cache-Control", "no-store")], text: "secret") }
        origin.routeRedirect("/moved", to: "/file")
    }

    func session(_ h: Harness, caching: Bool, delegate: (any URLSessionDelegate)? = nil) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        if caching { configuration.enableHTTPCaching(h.cache) } else { configuration.urlCache = nil }
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    func download(_ session: URLSession, _ url: URL) async -> DownloadOutcome {
        await withCheckedContinuation { continuation in
            session.downloadTask(with: url) { location, response, error in
                let file = location.flatMap { try? Data(contentsOf: $0) }
                if let location { try? FileManager.default.removeItem(at: location) }
                continuation.resume(returning: DownloadOutcome(file: file, response: response as? HTTPURLResponse, error: error))
            }.resume()
        }
    }

    @Test("with a completion handler: the same file as without the cache; a storable one answers a later data task")
    func completionHandler() async throws {
        let h = try Harness()
        routes(h.origin)
        for caching in [false, true] {
            let session = session(h, caching: caching)
            defer { session.finishTasksAndInvalidate() }
            let outcome = await download(session, h.origin.url("/file"))
            #expect(outcome.error == nil && outcome.file == Self.body, "caching \(caching)")
            #expect(outcome.response?.statusCode == 200 && outcome.response?.value(forHTTPHeaderField: "ETag") != nil)
        }
        #expect(h.origin.requestCount("/file") == 2, "each download reaches the origin")
        #expect(h.recorder.count(.stored) == 1, "the caching session stored what it downloaded")
        let later = try await h.get("/file")
        #expect(later.status == .fresh && later.data == Self.body)
        #expect(later.response.value(forHTTPHeaderField: "ETag") == "\"2\"")
        #expect(h.origin.requestCount("/file") == 2)
    }

    @Test("RFC 9111 §4.2.3: the time a download took counts in the age of what it stored, as for a data task")
    func downloadDelayCountsInAge() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        h.origin.route("/slow") { _, hit in
            h.clock.advance(by: 3) // the origin takes this long to answer
            return .init(headers: [("Cache-Control", "max-age=4"), ("Age", "1")], text: "slow \(hit)")
        }
        let session = session(h, caching: true)
        defer { session.finishTasksAndInvalidate() }
        #expect(await download(session, h.origin.url("/slow")).file == Data("slow 1".utf8))
        #expect(await h.recorder.wait(for: .stored))
        let later = try await h.get("/slow")
        #expect(later.status != .fresh && later.text == "slow 2", "age 1 + 3 s on the way, lifetime 4")
    }

    @Test("with a delegate: progress, the file, completion, in Foundation's order; redirects ask the delegate")
    func delegate() async throws {
        let h = try Harness()
        routes(h.origin)
        var seen: [DownloadProbe.State] = []
        for caching in [false, true] {
            let probe = DownloadProbe()
            let session = session(h, caching: caching, delegate: probe)
            defer { session.finishTasksAndInvalidate() }
            let task = session.downloadTask(with: h.origin.url("/moved"))
            task.resume()
            let state = try #require(await probe.finished())
            #expect(state.error == nil && state.file == Self.body, "caching \(caching)")
            #expect(state.order == ["redirect", "write", "file", "complete"], "caching \(caching)")
            #expect(state.written.last?.1 == Int64(Self.body.count))
            #expect(task.currentRequest?.url?.path == "/file", "currentRequest follows the redirect")
            #expect(task.countOfBytesReceived == Int64(Self.body.count))
            seen.append(state)
        }
        #expect(seen[0].redirects == seen[1].redirects && seen[0].written.count > 0 && seen[1].written.count > 0)
        #expect(try await h.get("/file").status == .fresh, "stored under the URL it came from")
    }

    @Test("download(for:) returns the file; an answer that may not be stored is not")
    func asyncDownload() async throws {
        let h = try Harness()
        routes(h.origin)
        let session = session(h, caching: true)
        defer { session.finishTasksAndInvalidate() }
        let (location, response) = try await session.download(for: URLRequest(url: h.origin.url("/private")))
        #expect(try Data(contentsOf: location) == Data("secret".utf8))
        try? FileManager.default.removeItem(at: location)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(h.recorder.count(.notStored(.responseNoStore)) == 1)
        #expect(try await h.get("/private").status == .bypass)
        #expect(h.origin.requestCount("/private") == 2)
    }

    @Test("cancel(byProducingResumeData:) mid-transfer: nil resume data and -999, as without the cache; the origin sees the transfer end")
    func cancelWithResumeData() async throws {
        let h = try Harness()
        for caching in [false, true] {
            let stream = LoopbackOrigin.BodyStream(framing: .contentLength(1_000_000))
            h.origin.route("/slow\(caching)", response: .init(headers: [("Cache-Control", "max-age=600")], stream: stream))
            let probe = DownloadProbe()
            let session = session(h, caching: caching, delegate: probe)
            defer { session.finishTasksAndInvalidate() }
            let task = session.downloadTask(with: h.origin.url("/slow\(caching)"))
            task.resume()
            stream.write(LoopbackOrigin.filler(count: 10_000))
            #expect(await probe.state.wait { !$0.written.isEmpty })
            let resumeData = Watched<Data??>(nil)
            task.cancel { data in resumeData.update { $0 = .some(data) } }
            #expect(await resumeData.wait { $0 != nil })
            #expect(resumeData.value == .some(nil), "Foundation on Linux never produces resume data")
            let state = try #require(await probe.finished())
            #expect(state.errorCode == NSURLErrorCancelled && state.file == nil, "caching \(caching)")
            #expect(await stream.ended() == .clientClosed, "caching \(caching)")
        }
        #expect(h.recorder.count(.stored) == 0)
    }

    @Test("a download's counters match Foundation's: bytes received, expected")
    func counters() async throws {
        let h = try Harness()
        routes(h.origin)
        var counts: [[Int64]] = []
        for caching in [false, true] {
            let probe = DownloadProbe()
            let session = session(h, caching: caching, delegate: probe)
            defer { session.finishTasksAndInvalidate() }
            let task = session.downloadTask(with: h.origin.url("/file"))
            task.resume()
            _ = try #require(await probe.finished())
            counts.append([task.countOfBytesReceived, task.countOfBytesExpectedToReceive, task.countOfBytesSent])
        }
        #expect(counts[0] == counts[1])
        #expect(counts[1][0] == Int64(Self.body.count))
    }
}
