import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// More of the sequences clients make: suspension mid-answer, batches cancelled in flight,
/// retries as new tasks, uploads cancelled while they send. Each on a plain session and a
/// caching one, compared; where Foundation 6.3.1 alone does something no caller wants (it
/// sends a suspended request again, or never ends a suspended POST), the test says so and
/// holds the cache to the rule that matters: an unsafe method is sent once.
@Suite("Client call sequences: suspension, batches, retries, uploads")
struct ClientSequenceTests {
    typealias Run = ClientLifecycleTests.Run
    let lifecycle = ClientLifecycleTests()

    @Test("suspend() while the body is held, then resume(): the answer once, and a POST sent once (Foundation alone sends a GET again and never ends a POST)",
          arguments: ClientLifecycleTests.methods)
    func suspendMidAnswer(method: String) async throws {
        let h = try Harness()
        let gates = Watched<[String: LoopbackOrigin.Gate]>([:])
        let runs = await lifecycle.both(h, "/held", method: method, route: { path in
            let gate = LoopbackOrigin.Gate()
            gates.update { $0[path] = gate }
            h.origin.route(path) { _, hit in
                var response = LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], text: "answer \(hit)")
                response.bodyGate = gate
                return response
            }
        }, drive: { task, probe in
            let gate = gates.value[task.originalRequest?.url?.path ?? ""]!
            task.resume()
            _ = await gate.reached()
            _ = await probe.wait(timeout: 2) { $0.response != nil }
            task.suspend()
            #expect(task.state == .suspended)
            task.resume()
            gate.open()
        })
        let caching = runs[1]
        #expect(caching.requests == 1, "sent once")
        #expect(caching.text == "answer 1" && caching.state?.order == ["response", "data", "complete"])
        if method == "GET" {
            #expect(runs[0].requests == 2 && runs[0].state?.order == ["response", "response", "data", "complete"],
                    "Foundation alone sends the GET again, and reports a second response")
        } else {
            #expect(runs[0].state == nil && runs[0].requests == 1, "Foundation alone never ends the suspended POST")
        }
    }

    @Test("suspend() then cancel(): -999, the answer never delivered, as without the cache", arguments: ClientLifecycleTests.methods)
    func suspendThenCancel(method: String) async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        let runs = await lifecycle.both(h, "/parked", method: method, route: { path in
            h.origin.route(path) { _, _ in
                var response = LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], text: "parked")
                response.bodyGate = gate
                return response
            }
        }, drive: { task, _ in
            task.resume()
            _ = await gate.reached(count: gate.arrivals + 1)
            task.suspend()
            task.cancel()
        })
        gate.open()
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])
        #expect(runs.map(\.requests) == [1, 1])
        #expect(runs[1].state?.chunks.isEmpty == true)
    }

    @Test("five POSTs in flight, each cancelled as Alamofire cancels (resume(); cancel()): five requests at the origin")
    func batchOfPostsCancelled() async throws {
        let h = try Harness()
        for caching in [false, true] {
            let path = "/batch-\(caching)"
            let gate = LoopbackOrigin.Gate()
            h.origin.route(path) { _, _ in
                var response = LoopbackOrigin.Response(text: "created")
                response.headGate = gate
                return response
            }
            let probes = (0..<5).map { _ in ProbeDelegate() }
            let sessions = probes.map { lifecycle.session(h, caching: caching, $0) }
            defer { sessions.forEach { $0.finishTasksAndInvalidate() } }
            let tasks = sessions.map { $0.dataTask(with: lifecycle.request(h, path, method: "POST")) }
            tasks.forEach { $0.resume() }
            #expect(await gate.reached(count: 5))
            for task in tasks {
                task.resume()
                task.cancel()
            }
            for probe in probes { #expect(await probe.finished()?.errorCode == NSURLErrorCancelled) }
            gate.open()
            #expect(h.origin.requestCount(path) == 5, "caching \(caching)")
        }
    }

    @Test("a 401 retried as a new task with a token (an interceptor's retry): two requests, the 401 and then the answer, as without the cache")
    func retryAfter401() async throws {
        let h = try Harness()
        var outcomes: [[Int?]] = []
        for caching in [false, true] {
            let path = "/api-\(caching)"
            h.origin.route(path) { request, _ in
                guard request.header("Authorization") == "Bearer good" else {
                    return .init(status: 401, headers: [("WWW-Authenticate", "Bearer realm=\"api\", error=\"invalid_token\"")], text: "no")
                }
                return .init(headers: [("Cache-Control", "max-age=60")], text: "yes")
            }
            let probe = ProbeDelegate()
            let session = lifecycle.session(h, caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            let first = try #require(await fetchOutcome(session, URLRequest(url: h.origin.url(path))))
            var retry = URLRequest(url: h.origin.url(path))
            retry.setValue("Bearer good", forHTTPHeaderField: "Authorization")
            let second = try #require(await fetchOutcome(session, retry))
            #expect(first.response?.response.value(forHTTPHeaderField: "WWW-Authenticate")?.contains("invalid_token") == true)
            #expect(second.response?.text == "yes" && probe.value.challenges.isEmpty)
            outcomes.append([first.response?.response.statusCode, second.response?.response.statusCode, h.origin.requestCount(path)])
        }
        #expect(outcomes[0] == outcomes[1] && outcomes[1] == [401, 200, 2])
    }

    @Test("an upload cancelled after its first progress report: -999, sent at most once, as without the cache")
    func uploadThenCancel() async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate()
        let runs = await lifecycle.both(h, "/upload", method: "PUT", route: { path in
            h.origin.route(path) { _, _ in
                var response = LoopbackOrigin.Response(text: "stored")
                response.headGate = gate
                return response
            }
        }, drive: { task, probe in
            task.resume()
            #expect(await probe.wait { !$0.sent.isEmpty }, "progress reached the delegate")
            task.cancel()
        })
        gate.open()
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])
        #expect(runs.allSatisfy { $0.requests <= 1 })
        #expect(runs.map { $0.state?.sent.last?.1 } == [7, 7], "the whole body was reported sent")
    }

    @Test("cancel() inside didReceive(response) once the whole answer has come with its head: the answer, no -999, as Foundation's own class gives it (a miss not stored, and a hit)")
    func cancelAfterTheWholeAnswer() async throws {
        let h = try Harness()
        h.origin.route("/small", response: .init(headers: [("Cache-Control", "max-age=600")], text: "small"))
        // In one write, so that the whole answer comes in the read that brings its head (the
        // origin's usual two writes, head then body, are two reads now and then under a sanitizer).
        var whole = LoopbackOrigin.Response()
        whole.raw = Data("HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 5\r\n\r\nsmall".utf8)
        h.origin.route("/unstored", response: whole)
        // Stored first: through the cache every /small below is a hit. A miss that is stored
        // asks a data delegate `willCacheResponse` first and ends after its answer, so a
        // cancel() made before that ends it (Foundation asks on the work queue, and its end
        // does not wait for the answer).
        _ = try await h.get("/small")
        var seen: [String] = []
        for round in 0..<20 {
            for path in ["/unstored", "/small"] {
                let delegate = CancelOnResponse()
                let configuration = URLSessionConfiguration.ephemeral
                configuration.enableHTTPCaching(h.cache)
                let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
                defer { session.finishTasksAndInvalidate() }
                session.dataTask(with: h.origin.url(path)).resume()
                #expect(await delegate.state.wait { $0.ended != nil })
                let state = delegate.state.value
                seen.append("\(path) \(round): \(state.ended ?? "-") \(state.bytes)")
            }
        }
        // Foundation alone ends the task before its delegate hears of the response when the
        // body came in the same read as the head (usually: it loses to the cancel now and then
        // here too, and then nothing is compared). Through the cache it always ends first.
        #expect(seen.allSatisfy { $0.hasSuffix(": ok 5") }, "\(seen)")
    }

    /// A data delegate (not asked before storing: it does not implement `willCacheResponse`)
    /// that cancels its task as soon as it hears of the response.
    private final class CancelOnResponse: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        let state = Watched((bytes: 0, ended: String?.none))

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
            dataTask.cancel()
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            state.update { $0.bytes += data.count }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            state.update { $0.ended = error.map { String(($0 as NSError).code) } ?? "ok" }
        }
    }
}
