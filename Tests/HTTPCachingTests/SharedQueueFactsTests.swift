import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching

@Suite("Facts about the queue every session's work runs on")
struct SharedQueueFactsTests {
    #if canImport(FoundationNetworking)
    @Test("the work queues of tasks of different sessions never run at the same time: they share one serial queue (so the cache may deliver on the forwarded task's queue)")
    func sharedSerialQueue() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [SilentProtocol.self]
        let first = URLSession(configuration: configuration), second = URLSession(configuration: configuration)
        defer { first.invalidateAndCancel(); second.invalidateAndCancel() }
        let one = first.dataTask(with: URL(string: "http://facts.test/one")!)
        let other = second.dataTask(with: URL(string: "http://facts.test/other")!)
        let queueOne = try #require(TaskIntrospection.workQueue(of: one))
        let queueOther = try #require(TaskIntrospection.workQueue(of: other))
        let overlapped = Watched<Bool?>(nil)
        queueOne.async {
            let ran = DispatchSemaphore(value: 0)
            queueOther.async { ran.signal() }
            let concurrent = ran.wait(timeout: .now() + 0.2) == .success
            overlapped.update { $0 = concurrent }
        }
        #expect(await overlapped.wait { $0 != nil })
        #expect(overlapped.value == false, "a block on the other session's task queue waited for this one")
    }

    @Test("a session's transfers read their sockets on its multi handle's queue, which shares that serial queue too (the cache delivers forwarded answers there)")
    func transferQueue() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        let first = URLSession(configuration: configuration), second = URLSession(configuration: configuration)
        defer { first.invalidateAndCancel(); second.invalidateAndCancel() }
        let other = second.dataTask(with: URL(string: "http://facts.test/other")!)
        let transferQueue = try #require(TaskIntrospection.transferQueue(of: first))
        #expect(transferQueue.label == "MultiHandle.isolation")
        let otherQueue = try #require(TaskIntrospection.workQueue(of: other))
        let overlapped = Watched<Bool?>(nil)
        transferQueue.async {
            let ran = DispatchSemaphore(value: 0)
            otherQueue.async { ran.signal() }
            let concurrent = ran.wait(timeout: .now() + 0.2) == .success
            overlapped.update { $0 = concurrent }
        }
        #expect(await overlapped.wait { $0 != nil })
        #expect(overlapped.value == false, "a block on another session's task queue waited for the transfer queue's")
    }
    #endif
}
