import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// `Delivery.hold()`: the calls made while a hold is open wait for its end, whatever else
/// would send them (a task resumed after `suspend()`).
@Suite("Delivery holds")
struct DeliveryHoldTests {
    @Test("a resume() while a hold is open sends nothing; the hold's end sends every call, in order")
    func resumeWaitsForTheHold() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [SilentProtocol.self]
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://delivery.test/hold")!
        let task = session.dataTask(with: url)
        task.resume() // the silent protocol keeps it running
        let client = RecordingClient()
        let delivery = Delivery(protocol: SilentProtocol(task: task, cachedResponse: nil, client: nil), client: client)
        delivery.hold()
        delivery.deliver(HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!, body: Data("body".utf8))
        delivery.resume()
        #expect(client.calls.value.isEmpty, "nothing went out while the hold was open")
        delivery.release()
        #expect(await client.calls.wait { $0.count == 3 })
        #expect(client.calls.value == ["response", "data", "finish"])
    }

    @Test("calls already scheduled on the work queue when a hold opens wait for the hold's end")
    func scheduledCallsWaitForTheHold() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [SilentProtocol.self]
        let session = URLSession(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://delivery.test/scheduled")!
        let task = session.dataTask(with: url)
        task.resume()
        let workQueue = try #require(TaskIntrospection.workQueue(of: task))
        let client = RecordingClient()
        let delivery = Delivery(protocol: SilentProtocol(task: task, cachedResponse: nil, client: nil), client: client)
        // The work queue is held (a few milliseconds: it is Foundation's, shared by every session)
        // while the calls are scheduled behind the holding block and the hold opens.
        let entered = DispatchSemaphore(value: 0), gate = DispatchSemaphore(value: 0)
        workQueue.async { entered.signal(); gate.wait() }
        entered.wait()
        delivery.deliver(HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!, body: Data("body".utf8))
        delivery.hold()
        gate.signal()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in workQueue.async { done.resume() } }
        #expect(client.calls.value.isEmpty, "the scheduled block sent nothing while the hold was open")
        delivery.release()
        #expect(await client.calls.wait { $0.count == 3 })
        #expect(client.calls.value == ["response", "data", "finish"])
    }
}

/// A client that records the name of every call made to it.
final class RecordingClient: NSObject, URLProtocolClient, Sendable {
    let calls = Watched<[String]>([])

    private func record(_ name: String) { calls.update { $0.append(name) } }

    func urlProtocol(_ protocol: URLProtocol, wasRedirectedTo request: URLRequest, redirectResponse: URLResponse) { record("redirect") }
    func urlProtocol(_ protocol: URLProtocol, cachedResponseIsValid cachedResponse: CachedURLResponse) { record("cachedResponseIsValid") }
    func urlProtocol(_ protocol: URLProtocol, didReceive response: URLResponse, cacheStoragePolicy policy: URLCache.StoragePolicy) { record("response") }
    func urlProtocol(_ protocol: URLProtocol, didLoad data: Data) { record("data") }
    func urlProtocolDidFinishLoading(_ protocol: URLProtocol) { record("finish") }
    func urlProtocol(_ protocol: URLProtocol, didFailWithError error: any Error) { record("fail") }
    func urlProtocol(_ protocol: URLProtocol, didReceive challenge: URLAuthenticationChallenge) { record("challenge") }
    func urlProtocol(_ protocol: URLProtocol, didCancel challenge: URLAuthenticationChallenge) { record("cancelChallenge") }
}
