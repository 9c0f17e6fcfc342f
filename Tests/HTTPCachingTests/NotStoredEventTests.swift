import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Every response the cache does not keep says why, each time: "why is this never cached?"
/// always has an answer in the events.
@Suite("Every non-answer is an event")
struct NotStoredEventTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let status: Int
        let headers: [(name: String, value: String)]
        let reason: NotStoredReason
        var testDescription: String { "\(reason)" }
    }

    static let cases: [Case] = [
        Case(status: 200, headers: [("Cache-Control", "no-store")], reason: .responseNoStore),
        Case(status: 200, headers: [("Vary", "*")], reason: .varyStar),
        Case(status: 200, headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept"), ("Connection", "vary")],
             reason: .connectionNamesCachingField("vary")),
        Case(status: 200, headers: [("Cache-Control", "no-cache"), ("Connection", "Cache-Control")],
             reason: .connectionNamesCachingField("cache-control")),
        Case(status: 200, headers: [("Set-Cookie", "session=1")], reason: .setsCookie),
        Case(status: 500, headers: [], reason: .status(500)),
        Case(status: 299, headers: [("Cache-Control", "max-age=60, must-understand")], reason: .statusNotUnderstood(299)),
    ]

    @Test("a response not stored because of its status or headers says so, on every request", arguments: cases)
    func becauseOfHeaders(_ check: Case) async throws {
        let h = try Harness()
        h.origin.route("/n") { _, hit in .init(status: check.status, headers: check.headers, text: "n\(hit)") }
        for expected in ["n1", "n2"] {
            let answer = try await h.get("/n")
            #expect(answer.text == expected && answer.status == .bypass)
        }
        #expect(h.recorder.count(.notStored(check.reason)) == 2)
        #expect(h.recorder.count(.stored) == 0 && h.cache.entryCount == 0)
    }

    @Test("a request that forbids storing says so")
    func requestNoStore() async throws {
        let h = try Harness()
        h.origin.routeVersioned("/r")
        _ = try await h.get("/r", headers: ["Cache-Control": "no-store"])
        #expect(h.recorder.count(.notStored(.requestNoStore)) == 1 && h.cache.entryCount == 0)
    }

    @Test("too large for the store, known from Content-Length, found while buffering, or only once the entry is built: notStored(tooLarge) once",
          arguments: ["length", "chunked", "entry"])
    func tooLarge(how: String) async throws {
        // The limit counts the whole entry (body, headers, key), the body alone is checked first.
        let store = try MemoryResponseStore(byteLimit: 1 << 20, maxEntrySize: 4_000)
        let h = try Harness(store: store)
        let body = LoopbackOrigin.filler(count: how == "entry" ? 3_990 : 10_000)
        if how == "chunked" {
            let stream = LoopbackOrigin.BodyStream()
            h.origin.route("/big", response: .init(headers: [("Cache-Control", "max-age=60")], stream: stream))
            Task {
                guard await stream.headersSent() else { return }
                for offset in stride(from: 0, to: body.count, by: 1_000) {
                    stream.write(body.subdata(in: offset..<min(offset + 1_000, body.count)))
                    _ = await stream.flushed()
                }
                stream.finish()
            }
        } else {
            h.origin.route("/big", response: .init(headers: [("Cache-Control", "max-age=60")], body: body))
        }
        let answer = try await h.get("/big")
        #expect(answer.data == body, "the caller gets the whole body all the same")
        #expect(h.recorder.count { $0.notStoredReason?.name == "tooLarge" && $0.notStoredReason?.description.hasSuffix("(4000 bytes)") == true } == 1, "\(h.recorder.kinds)")
        #expect(h.recorder.count(.stored) == 0 && h.cache.entryCount == 0)
    }

    @Test("a store write that fails says so, and the caller still gets its answer; the next request tries again")
    func storeFailed() async throws {
        let store = ioPathStore()
        store.beforeWrite = { _ in throw WriteFailed() }
        let h = try Harness(store: store)
        h.origin.route("/w", response: .init(headers: [("Cache-Control", "max-age=60")], text: "w"))
        for _ in 0..<2 {
            let answer = try await h.get("/w")
            #expect(answer.text == "w" && answer.status == .miss)
        }
        let failures = h.recorder.kinds.compactMap { kind -> String? in
            kind.name == "storeFailed" ? kind.reason : nil
        }
        #expect(failures.count == 2)
        #expect(failures.allSatisfy { $0.contains("the disk is full") }, "\(failures)")
        store.beforeWrite = nil
        _ = try await h.get("/w")
        #expect(try await h.get("/w").status == .fresh)
    }
}
