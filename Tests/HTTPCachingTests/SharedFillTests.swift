import Foundation
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
