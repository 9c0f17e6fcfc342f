import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// `Delivery.hold()`: the calls waiting while a hold is open wait for its end, whatever else
/// would send them (the task resumed after `suspend()`, a block already on the work queue).
@Suite("Delivery holds", .timeLimit(.minutes(1)))
struct DeliveryHoldTests {
    /// A task kept running by a silent protocol, and a `Delivery` for it whose client records
    /// its calls.
    private struct Running: @unchecked Sendable {
        let silent: SilentTask
        let client = RecordingClient<String>()
        let delivery: Delivery
        var session: URLSession { silent.session }
        var task: URLSessionDataTask { silent.task }

        init(_ path: String) throws {
            silent = try SilentTask(URL(string: "http://delivery.test\(path)")!)
            delivery = Delivery(protocol: SilentProtocol(task: silent.task, cachedResponse: nil, client: nil), client: client)
        }

        func deliverAnswer() {
            delivery.deliver(HTTPURLResponse(url: task.originalRequest!.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!,
                             body: Data("body".utf8))
        }

        /// Runs `body` on the work queue and returns once it has run (after every block before it).
        func onWorkQueue(_ body: @escaping @Sendable () -> Void = {}) async {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in silent.workQueue.async { body(); done.resume() } }
        }
    }

    @Test("calls that waited while the task was suspended stay held when it is resumed during a hold; the hold's end sends them, in order")
    func resumeWaitsForTheHold() async throws {
        let run = try Running("/resumed")
        defer { run.session.invalidateAndCancel() }
        run.task.suspend()
        run.deliverAnswer() // its block finds the task suspended: the calls wait
        await run.onWorkQueue()
        #expect(run.client.calls.value.isEmpty, "nothing goes out while the task is suspended")
        run.delivery.hold()
        run.task.resume()
        let delivery = run.delivery
        await run.onWorkQueue { delivery.resume() } // where startLoading calls it
        #expect(run.client.calls.value.isEmpty, "nothing went out while the hold was open")
        run.delivery.release()
        #expect(await run.client.calls.wait { $0.count == 3 })
        #expect(run.client.calls.value == ["response", "data", "finish"])
    }

    @Test("calls already scheduled on the work queue when a hold opens wait for the hold's end")
    func scheduledCallsWaitForTheHold() async throws {
        let run = try Running("/scheduled")
        defer { run.session.invalidateAndCancel() }
        // On the work queue, so the block that runs the calls is scheduled behind this one and
        // finds the hold open (nothing waits for the queue, nor holds it).
        await run.onWorkQueue {
            run.deliverAnswer()
            run.delivery.hold()
        }
        await run.onWorkQueue()
        #expect(run.client.calls.value.isEmpty, "the scheduled block sent nothing while the hold was open")
        run.delivery.release()
        #expect(await run.client.calls.wait { $0.count == 3 })
        #expect(run.client.calls.value == ["response", "data", "finish"])
    }
}
