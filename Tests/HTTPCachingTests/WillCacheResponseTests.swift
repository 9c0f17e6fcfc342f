import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// `urlSession(_:dataTask:willCacheResponse:completionHandler:)` keeps its meaning through
/// the cache: asked once before a data task's answer is stored, with what is about to be
/// stored; nil stores nothing, a changed response is what is stored and served, a memory-only
/// one never reaches a disk. (Foundation 6.3.1 alone never asks on Linux: its HTTP class
/// stores nothing in `URLCache`.) Alamofire's `ResponseCacher` relies on it.
@Suite("willCacheResponse through the cache")
struct WillCacheResponseTests {
    static func storable(_ origin: LoopbackOrigin, _ path: String = "/w") {
        origin.route(path) { _, hit in .init(headers: [("Cache-Control", "max-age=600"), ("X-Hit", "\(hit)")], text: "body \(hit)") }
    }

    @Test("nil (ResponseCacher.doNotCache): nothing stored; the next request goes to the origin, as without a cache",
          arguments: [TaskKind.delegate, .completionHandler, .asyncData])
    func declines(kind: TaskKind) async throws {
        let h = try Harness()
        Self.storable(h.origin)
        var questions = 0
        for expected in ["body 1", "body 2"] {
            let probe = ProbeDelegate(onWillCache: { _, answer in answer(nil) })
            let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/w")), probe: probe) { h.delegateSession($0) })
            #expect(outcome.text == expected)
            questions += probe.value.cacheQuestions.count
        }
        #expect(questions == 2 && h.origin.requestCount("/w") == 2)
        #expect(h.recorder.count(.notStored(.declinedByDelegate)) == 2 && h.recorder.count(.stored) == 0)
    }

    @Test("a changed response (ResponseCacher.modify): what is stored and served; asked once, never for the hit")
    func replaces() async throws {
        let h = try Harness()
        Self.storable(h.origin)
        let probe = ProbeDelegate(onWillCache: { proposed, answer in
            let old = proposed.response as! HTTPURLResponse
            var fields = old.headerFields
            fields["X-Modified"] = "yes"
            let response = HTTPURLResponse(url: old.url!, statusCode: old.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)!
            answer(CachedURLResponse(response: response, data: Data("changed".utf8), userInfo: nil, storagePolicy: .allowed))
        })
        let first = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/w")), probe: probe) { h.delegateSession($0) })
        #expect(first.text == "body 1" && first.response?.value(forHTTPHeaderField: "X-Modified") == nil, "the caller gets the network's answer")
        let question = try #require(probe.value.cacheQuestions.first)
        #expect(String(decoding: question.data, as: UTF8.self) == "body 1" && question.storagePolicy == .allowed)
        #expect((question.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Hit") == "1")
        let second = try await h.get("/w")
        #expect(second.status == .fresh && second.text == "changed")
        #expect(second.response.value(forHTTPHeaderField: "X-Modified") == "yes")
        #expect(probe.value.cacheQuestions.count == 1 && h.origin.requestCount("/w") == 1)
    }

    @Test("memory only: kept by a memory store and a tiered store's memory, never written to a disk store")
    func memoryOnly() async throws {
        let directory = TemporaryDirectory()
        let disk = try DiskResponseStore(directory: directory.url.appendingPathComponent("disk"))
        let tiered = TieredResponseStore(back: try DiskResponseStore(directory: directory.url.appendingPathComponent("tiered")))
        for (store, served) in [(MemoryResponseStore() as any ResponseStore, true), (disk, false), (tiered, true)] {
            let memoryOnly = ProbeDelegate(onWillCache: { proposed, answer in
                answer(CachedURLResponse(response: proposed.response, data: proposed.data, userInfo: nil, storagePolicy: .allowedInMemoryOnly))
            })
            let h = try Harness(store: store)
            Self.storable(h.origin)
            _ = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/w")), probe: memoryOnly) { h.delegateSession($0) })
            #expect((store is MemoryResponseStore ? 0 : store.entryCount) == 0, "nothing on disk")
            if store is DiskResponseStore { #expect(h.recorder.count(.notStored(.memoryOnly)) == 1) }
            #expect(try await h.get("/w").status == (served ? .fresh : .miss), "\(type(of: store))")
        }
        #expect(tiered.memory.entryCount == 1 && tiered.back.entryCount == 0)
    }

    @Test("the data(for:delegate:) delegate is the one asked; never for answers the cache would not store, nor for refreshes")
    func whoIsAsked() async throws {
        let h = try Harness(configuration: CacheConfiguration(windows: .test(fresh: 10, usable: 100)))
        Self.storable(h.origin)
        h.origin.route("/never", response: .init(headers: [("Cache-Control", "no-store")], text: "n"))
        let given = ProbeDelegate()
        let session = h.plainCachingSession()
        defer { session.finishTasksAndInvalidate() }
        _ = try await session.data(for: URLRequest(url: h.origin.url("/w")), delegate: given)
        _ = try await session.data(for: URLRequest(url: h.origin.url("/never")), delegate: given)
        #expect(given.value.cacheQuestions.count == 1)
        h.clock.advance(by: 20)
        let probe = ProbeDelegate()
        _ = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/w")), probe: probe) { h.delegateSession($0) })
        #expect(await h.recorder.wait(for: .refreshed(bodyChanged: true)))
        #expect(probe.value.cacheQuestions.isEmpty, "a stale hit asks nothing, and its refresh has no caller to ask")
    }

    @Test("a delegate slow to answer holds only its own task: another session's request is answered meanwhile")
    func slowDelegateStallsNobody() async throws {
        let h = try Harness()
        Self.storable(h.origin)
        h.origin.route("/other", response: .init(text: "other"))
        let held = Watched<[@Sendable (CachedURLResponse?) -> Void]>([])
        let slow = ProbeDelegate(onWillCache: { proposed, answer in held.update { $0.append({ _ in answer(proposed) }) } })
        let session = h.delegateSession(slow)
        defer { session.finishTasksAndInvalidate() }
        session.dataTask(with: h.origin.url("/w")).resume()
        #expect(await held.wait { !$0.isEmpty }, "asked")
        let other = try await h.get("/other")
        #expect(other.text == "other" && !slow.value.completed, "answered while the first waits for its delegate")
        held.value.first?(nil)
        #expect(await slow.finished()?.data == Data("body 1".utf8))
        #expect(try await h.get("/w").status == .fresh)
    }

    @Test("asked after the response and every chunk reached the delegate, as Foundation asks (20 times)")
    func askedAfterTheBody() async throws {
        let h = try Harness()
        for round in 0..<20 {
            h.origin.route("/o\(round)") { _, _ in .init(headers: [("Cache-Control", "max-age=60")], body: LoopbackOrigin.filler(count: 50_000)) }
            let probe = ProbeDelegate()
            let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/o\(round)")), probe: probe) { h.delegateSession($0) })
            #expect(outcome.data.count == 50_000)
            let seen = try #require(probe.value.askedAfter.first)
            #expect(seen.first == "response" && seen.filter { $0 == "data" }.count == probe.value.chunks.count, "round \(round): \(seen)")
        }
    }

    @Test("cancelled while its delegate is asked: the question's late answer stores nothing, and the next request for the URL goes out, never waits forever")
    func cancelledWhileAsked() async throws {
        let h = try Harness()
        Self.storable(h.origin)
        let held = Watched<[@Sendable () -> Void]>([])
        let probe = ProbeDelegate(onWillCache: { proposed, answer in held.update { $0.append { answer(proposed) } } })
        let session = h.delegateSession(probe)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: h.origin.url("/w"))
        task.resume()
        #expect(await held.wait { !$0.isEmpty })
        task.cancel()
        #expect(await probe.finished()?.errorCode == NSURLErrorCancelled)
        held.value.first?()
        let next = try #require(await fetchOutcome(h.plainCachingSession(), URLRequest(url: h.origin.url("/w")), timeout: 5),
                                "answered, not left waiting on the cancelled request's flight")
        #expect(next.response?.text == "body 2" && h.origin.requestCount("/w") == 2)
    }

    @Test("Cache-Status says stored only when it is certain: not while the delegate is still to be asked")
    func storedOnlyWhenCertain() async throws {
        let h = try Harness()
        Self.storable(h.origin)
        let declining = ProbeDelegate(onWillCache: { _, answer in answer(nil) })
        let asked = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/w")), probe: declining) { h.delegateSession($0) })
        let askedField = try #require(asked.response?.value(forHTTPHeaderField: HTTPCachingHeaders.cacheStatusField))
        #expect(!askedField.contains("stored"), "\(askedField)")
        let plain = try await h.get("/w")
        let plainField = try #require(plain.response.value(forHTTPHeaderField: HTTPCachingHeaders.cacheStatusField))
        #expect(plainField.contains("stored"), "a completion handler is never asked: \(plainField)")
    }
}
