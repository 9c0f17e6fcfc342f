import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// The call sequences well-known clients make on a task (Alamofire's `cancel()` is
/// `resume(); cancel()`; interceptors retry with a new task; delegates cancel from their own
/// callbacks), each run on a plain session and on a caching one in the same test, comparing
/// what the caller saw and what the origin received. Every sequence `URLSessionTask` allows in
/// swift-corelibs-foundation 6.3.1 (`resume`, `suspend`, `cancel`, in any order and number)
/// is here; a method that is not safe never reaches the origin more often than the caller asked.
@Suite("Client call sequences: the task lifecycle as without the cache")
struct ClientLifecycleTests {
    /// What one run left: the caller's record and the origin's request count for its path.
    struct Run {
        var state: ProbeDelegate.State?
        var requests: Int
        var text: String { state.map { String(decoding: $0.data, as: UTF8.self) } ?? "(no end)" }
    }

    static let methods = ["GET", "POST"]

    func session(_ h: Harness, caching: Bool, _ probe: ProbeDelegate) -> URLSession {
        h.session(caching: caching, probe)
    }

    func request(_ h: Harness, _ path: String, method: String) -> URLRequest {
        var request = URLRequest(url: h.origin.url(path))
        request.httpMethod = method
        if method != "GET" { request.httpBody = Data("payload".utf8) }
        return request
    }

    /// Runs `drive` with a task on a plain session, then on a caching one, each against its
    /// own copy of the route at `path` (made by `route` for that path).
    func both(_ h: Harness, _ path: String, method: String = "GET", probe makeProbe: () -> ProbeDelegate = { ProbeDelegate() },
              route: (String) -> Void, drive: (URLSessionDataTask, ProbeDelegate) async -> Void) async -> [Run] {
        var runs: [Run] = []
        for caching in [false, true] {
            let own = path + (caching ? "-caching" : "-plain")
            route(own)
            let probe = makeProbe()
            let session = session(h, caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            let task = session.dataTask(with: request(h, own, method: method))
            await drive(task, probe)
            runs.append(Run(state: await probe.finished(timeout: 5), requests: h.origin.requestCount(own)))
        }
        return runs
    }

    @Test("resume() twice on a running task: one request, one answer", arguments: methods)
    func resumeTwice(method: String) async throws {
        let h = try Harness()
        let gates = Watched<[String: LoopbackOrigin.Gate]>([:])
        let runs = await both(h, "/twice", method: method, route: { path in
            let gate = LoopbackOrigin.Gate()
            gates.update { $0[path] = gate }
            h.origin.route(path) { _, hit in
                var response = LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], text: "answer \(hit)")
                response.headGate = gate
                return response
            }
        }, drive: { task, _ in
            let gate = gates.value[task.originalRequest?.url?.path ?? ""]!
            task.resume()
            _ = await gate.reached()
            task.resume()
            #expect(task.state == .running)
            gate.open()
        })
        #expect(runs.map(\.requests) == [1, 1])
        #expect(runs.map(\.text) == ["answer 1", "answer 1"])
        #expect(runs[0].state?.order == runs[1].state?.order)
    }

    /// A route whose body the test writes, with `max-age` (storable, unless cut short).
    func streamed(_ h: Harness, _ streams: Watched<[String: LoopbackOrigin.BodyStream]>) -> (String) -> Void {
        { path in
            let stream = LoopbackOrigin.BodyStream(framing: .contentLength(100_000))
            streams.update { $0[path] = stream }
            h.origin.route(path, response: .init(headers: [("Cache-Control", "max-age=600")], stream: stream))
        }
    }

    @Test("Alamofire's cancel (resume(); cancel()) at the first body chunk: cancelled, the transfer aborted at the origin, nothing stored",
          arguments: methods)
    func resumeThenCancel(method: String) async throws {
        let h = try Harness()
        let streams = Watched<[String: LoopbackOrigin.BodyStream]>([:])
        let runs = await both(h, "/cut", method: method, route: streamed(h, streams), drive: { task, probe in
            task.resume()
            let stream = streams.value.first { task.originalRequest?.url?.path == $0.key }!.value
            stream.write(LoopbackOrigin.filler(count: 1000))
            _ = await probe.wait { !$0.chunks.isEmpty }
            task.resume()
            task.cancel()
            #expect(await stream.ended() == .clientClosed, "the origin sees the transfer aborted")
        })
        #expect(runs.map(\.requests) == [1, 1])
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])
        #expect(h.recorder.count(.stored) == 0 && h.cache.entryCount == 0, "a cancelled body is never stored")
    }

    @Test("cancel() inside the delegate's didReceive(response) and didReceive(data): -999, the transfer aborted, nothing stored",
          arguments: ["response", "data"])
    func cancelInsideCallbacks(event: String) async throws {
        let h = try Harness()
        let streams = Watched<[String: LoopbackOrigin.BodyStream]>([:])
        let runs = await both(h, "/inside", probe: { ProbeDelegate(onEvent: { seen, task in if seen == event { task.cancel() } }) },
                              route: streamed(h, streams), drive: { task, _ in
            task.resume()
            let stream = streams.value.first { task.originalRequest?.url?.path == $0.key }!.value
            stream.write(LoopbackOrigin.filler(count: 1000))
            #expect(await stream.ended() == .clientClosed)
        })
        #expect(runs.map(\.requests) == [1, 1])
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])
        #expect(runs[0].state?.order.last == "complete" && runs[1].state?.order.last == "complete")
        #expect(h.cache.entryCount == 0)
    }

    @Test("cancel() before resume(), resume() after it, cancel() twice, cancel() and suspend() after the end: one end each, as without the cache")
    func cancelAndSuspendAnyTime() async throws {
        let h = try Harness()
        let runs = await both(h, "/early", route: { h.origin.route($0, response: .init(text: "never")) }, drive: { task, _ in
            task.cancel()
            task.resume()
            task.cancel()
        })
        #expect(runs.map(\.requests) == [0, 0])
        #expect(runs.map { $0.state?.order } == [["complete"], ["complete"]])
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])

        let done = await both(h, "/done", route: { h.origin.route($0, response: .init(text: "done")) }, drive: { task, probe in
            task.resume()
            _ = await probe.finished()
            task.cancel()
            task.suspend()
            task.resume()
        })
        #expect(done.map(\.requests) == [1, 1] && done.map(\.text) == ["done", "done"])
        #expect(done.map { $0.state?.order } == [["response", "data", "complete"], ["response", "data", "complete"]])
    }

    @Test("resume(); cancel() at once (the start may not have run yet): cancelled, never sent more than once", arguments: methods)
    func cancelAtOnce(method: String) async throws {
        let h = try Harness()
        let gate = LoopbackOrigin.Gate() // the answer cannot beat the cancel
        let runs = await both(h, "/quick", method: method, route: { path in
            h.origin.route(path) { _, _ in
                var response = LoopbackOrigin.Response(text: "x")
                response.headGate = gate
                return response
            }
        }, drive: { task, _ in
            task.resume()
            task.cancel()
        })
        gate.open()
        #expect(runs.map { $0.state?.errorCode } == [NSURLErrorCancelled, NSURLErrorCancelled])
        #expect(runs.allSatisfy { $0.requests <= 1 })
    }

    @Test("suspend() before the first resume(), then resume(): one request, the answer, as without the cache", arguments: methods)
    func suspendFirst(method: String) async throws {
        let h = try Harness()
        let runs = await both(h, "/later", method: method, route: { h.origin.route($0, response: .init(text: "later")) }) { task, _ in
            task.suspend()
            task.resume()
            #expect(task.state == .suspended, "suspend and resume nest")
            task.resume()
        }
        #expect(runs.map(\.requests) == [1, 1] && runs.map(\.text) == ["later", "later"])
        #expect(runs[0].state?.order == runs[1].state?.order)
    }
}
