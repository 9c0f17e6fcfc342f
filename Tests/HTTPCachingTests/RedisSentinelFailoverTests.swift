import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// The primary replaced under a running cache: by `SENTINEL FAILOVER`, and by a crash.
extension RedisSentinelTests {
    /// A store with 16 entries, traffic on them from two workers, and the ports before the change.
    struct Running {
        let h: Harness
        let router: RedisSentinelRouter
        let paths: [String]
        let traffic: Traffic
        let workers: [Task<Void, Never>]
        let primary: Int
        let replica: Int
    }

    static func startTraffic(_ group: RedisSentinelGroup) async throws -> Running {
        let store = try group.makeStore()
        let h = try Harness(store: store)
        h.origin.route("/s") { request, _ in .init(text: "body of \(request.target)") }
        let paths = (0..<16).map { "/s?n=\($0)" }
        for path in paths { _ = try await h.get(path) }
        #expect(await h.recorder.wait(for: .stored, count: paths.count))
        let (primary, replica) = try group.roles()
        _ = try group.command(primary, "WAIT", 1, 2000) // the replica has every entry
        let traffic = Traffic()
        // Two workers: the Redis Cluster suite's failover runs at the same time, on the same cores.
        let workers = (0..<2).map { worker in
            Task.detached { await traffic.run(h, paths: paths, offset: worker * 7) }
        }
        #expect(await eventually(timeout: 10) { traffic.count(\.fresh) >= 30 }, "hits before the change")
        return Running(h: h, router: try router(store), paths: paths, traffic: traffic, workers: workers,
                       primary: primary, replica: replica)
    }

    /// Waits for the store to follow the switch and for hits to resume; stops the traffic and
    /// checks it; returns the seconds from `start` to the switch and to the first hit after it.
    static func finish(_ run: Running, since start: Date, switchesBefore: Int) async -> (switched: Double, hits: Double) {
        let followed = await eventually(timeout: 30) { run.router.switchCount > switchesBefore }
        #expect(followed, "the store followed the switch to \(run.replica)")
        let switched = Date().timeIntervalSince(start)
        run.traffic.phase = 2
        #expect(await eventually(timeout: 20) { run.traffic.freshAfterPromotion(of: Set(run.paths)) > 0 }, "hits resumed")
        let hits = Date().timeIntervalSince(start)
        run.traffic.stop()
        for worker in run.workers { await worker.value }
        #expect(run.router.primaryAddress?.port == run.replica)
        let summary = run.traffic.summary
        #expect(summary.failures.isEmpty, "requests that failed or got a wrong body: \(summary.failures.prefix(5))")
        #expect(summary.slowest < 5, "the slowest request took \(summary.slowest) s")
        print("Sentinel failover: store switched after \(String(format: "%.2f", switched)) s, hits resumed after "
              + "\(String(format: "%.2f", hits)) s, \(summary.requests) requests, "
              + "\(run.h.recorder.count(where: { $0.name == "storeFailed" })) storeFailed")
        return (switched, hits)
    }

    @Test("SENTINEL FAILOVER with traffic running: no request fails, hangs or gets a wrong body; the store follows the switch and hits resume from the promoted replica, with nothing restarted; a near cache follows it too")
    func sentinelFailover() async throws {
        let group = try Self.group()
        let near = try Self.nearCacheBeforeFailover(group)
        let run = try await Self.startTraffic(group)
        let switches = run.router.switchCount
        let start = Date()
        #expect(try group.command(group.sentinelPorts[1], "SENTINEL", "FAILOVER", RedisSentinelGroup.masterName).isOK)
        run.traffic.phase = 1
        _ = await Self.finish(run, since: start, switchesBefore: switches)
        // Sentinel demotes the old primary some seconds after the switch; do it now, as it would,
        // so the next test finds the group healthy sooner.
        #expect(try group.command(run.primary, "REPLICAOF", "127.0.0.1", run.replica).isOK)
        Self.nearCacheAfterFailover(near, promoted: run.replica)
        try group.waitUntilHealthy()
    }

    @Test("the primary killed (SIGKILL) with traffic running: storeFailed while it is down, never an error, a hang or a wrong body; hits resume once a sentinel promotes the replica")
    func primaryCrash() async throws {
        let group = try Self.group()
        let run = try await Self.startTraffic(group)
        let switches = run.router.switchCount
        let start = Date()
        group.kill(run.primary)
        run.traffic.phase = 1
        #expect(await run.h.recorder.wait(timeout: 15) { $0.contains { $0.kind.name == "storeFailed" } }, "storeFailed while the primary is down")
        _ = await Self.finish(run, since: start, switchesBefore: switches)
        try group.startData(run.primary, replicaOf: run.replica) // back as a replica, for the tests after this one
        try group.waitUntilHealthy()
    }
}
