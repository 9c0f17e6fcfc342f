import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCachingTestKit
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// One origin request per key across a fleet: processes sharing a disk or Redis store, each
/// with concurrent callers, on a cold key. The origin holds its first answer until every
/// other process is seen waiting for it, so the test proves the waiting by ordering.
@Suite("One origin request per key across processes sharing a store", .serialized)
struct SharedFillTests {
    static let processes = 4
    static let callers = 16

    /// Runs the fleet against `store` and checks what the origin and every caller saw.
    func fleet(store: String) throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let gate = LoopbackOrigin.Gate()
        origin.routeVersioned("/cold", prefix: "filled ", headers: [("Cache-Control", "max-age=600")], holdingFirst: .head(gate))
        let workers = try (0..<Self.processes).map { _ in
            try Worker(["fill", store, origin.url("/cold").absoluteString, "\(Self.callers)"])
        }
        defer { gate.open() }
        #expect(origin.waitForRequests("/cold", count: 1, timeout: 30))
        // Every process but the one whose request reached the origin waits for its answer.
        var waiting = 0
        var lines: [[String]] = Array(repeating: [], count: workers.count)
        let deadline = Date().addingTimeInterval(30)
        while waiting < Self.processes - 1 && Date() < deadline {
            for (index, worker) in workers.enumerated() {
                guard let line = worker.nextLine(timeout: 0.01) else { continue }
                lines[index].append(line)
                if line == "waiting" { waiting += 1 }
            }
        }
        #expect(waiting == Self.processes - 1, "every other process waited for the fill")
        #expect(origin.requestCount("/cold") == 1, "nobody else asked the origin while it was held")
        gate.open()
        for (index, worker) in workers.enumerated() {
            if lines[index].last != "done" { _ = worker.waitFor { line in lines[index].append(line); return line == "done" } }
            worker.waitForExit()
        }
        let answers = lines.joined().filter { $0.hasPrefix("answer ") }
        #expect(answers.count == Self.processes * Self.callers)
        #expect(answers.allSatisfy { $0.hasSuffix(" filled 1") }, "\(Set(answers))")
        #expect(origin.requestCount("/cold") == 1)
    }

    @Test("4 processes x 16 callers on one disk directory: 1 origin request, every caller gets its answer")
    func disk() throws {
        let directory = TemporaryDirectory()
        try fleet(store: directory.url.path)
    }

    @Test("4 processes x 16 callers on one Redis: 1 origin request, every caller gets its answer", .redisServer)
    func redis() throws {
        let server = try RedisServer()
        defer { server.stop() }
        try fleet(store: "redis://127.0.0.1:\(server.port)")
    }

    @Test("a disk store that cannot record a claim (its claims folder is a file): the miss goes to the origin at once, never waits out the lease")
    func claimThatCannotBeRecorded() async throws {
        let directory = TemporaryDirectory()
        var configuration = CacheConfiguration()
        configuration.sharedFillLease = 2
        let h = try Harness(configuration: configuration, store: DiskResponseStore(directory: directory.url))
        h.origin.route("/a", response: .init(headers: [("Cache-Control", "max-age=60")], text: "a"))
        h.origin.route("/b", response: .init(headers: [("Cache-Control", "max-age=60")], text: "b"))
        #expect(try await h.get("/a").status == .miss)
        let claims = directory.url.appendingPathComponent("claims")
        try FileManager.default.removeItem(at: claims)
        try Data("not a folder".utf8).write(to: claims)
        let result = try await h.get("/b")
        #expect(result.status == .miss && result.text == "b")
        #expect(h.recorder.count(.waitingForSharedFill) == 0, "no wait for a claim nobody holds")
        #expect(h.origin.requestCount("/b") == 1)
    }
}

@Suite("A fill claim is given back")
struct FillClaimReleaseTests {
    @Test("a claim won just as another process stored the answer and let go: the stored answer is served and the claim goes back at once, not at the end of its lease")
    func wonAsTheAnswerArrived() async throws {
        let staging = TemporaryDirectory(), shared = TemporaryDirectory()
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/f", prefix: "v", headers: [("Cache-Control", "max-age=600")])
        let url = origin.url("/f")
        // The answer another process will store, fetched once through a cache of its own.
        let stagingStore = try DiskResponseStore(directory: staging.url)
        defer { stagingStore.close() }
        let stagingConfiguration = URLSessionConfiguration.ephemeral
        stagingConfiguration.enableHTTPCaching(HTTPCache(store: stagingStore))
        let stagingSession = URLSession(configuration: stagingConfiguration)
        defer { stagingSession.finishTasksAndInvalidate() }
        _ = try await fetch(stagingSession, url)
        let inner = try DiskResponseStore(directory: shared.url)
        let other = try DiskResponseStore(directory: shared.url) // the other process
        defer { inner.close(); other.close() }
        let store = InstrumentedStore(inner)
        var configuration = CacheConfiguration()
        configuration.sharedFillLease = 3_600
        let h = try Harness(configuration: configuration, store: store)
        h.cache.engine.deadlines.holdForTests()
        let key = try h.cache.manage.key(for: URLRequest(url: url))
        let answer = try #require(try stagingStore.entry(for: key))
        #expect(other.claimRefresh(of: key.sharedFillClaim, lease: 3_600), "the other process is filling the key")
        let request = StartedFetch(h.session, URLRequest(url: url))
        #expect(await h.recorder.wait(for: .waitingForSharedFill, count: 1, timeout: 30))
        #expect(await h.cache.engine.deadlines.held(total: 1, timeout: 30), "its next look at the store is held")
        // Right after that look reads nothing, the other process stores the answer and lets go.
        let once = Atomic<Bool>(false)
        store.afterRead = { read, found in
            guard read == key, found == nil, !once.exchange(true, ordering: .relaxed) else { return }
            _ = try inner.write(answer)
            other.releaseRefresh(of: key.sharedFillClaim)
        }
        for look in h.cache.engine.deadlines.takeHeld() { look.work() } // wins the claim, then finds the answer
        #expect(try await request.value.text == "v1", "the stored answer, not a second origin request")
        h.cache.engine.ioQueue(for: key.url).sync {} // the claim's release runs there
        #expect(other.claimRefresh(of: key.sharedFillClaim, lease: 3_600), "the claim went back at once")
        #expect(origin.requestCount("/f") == 1)
    }
}
