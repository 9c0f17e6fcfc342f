import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// The cluster changing under a running cache: a slot moved to another primary, and a primary
/// killed and replaced by its replica.
extension RedisClusterTests {
    @Test("a slot moved by hand (CLUSTER SETSLOT, MIGRATE): ASK is followed while it moves, MOVED after, and the map is learned again; every request a fresh hit")
    func movedSlot() async throws {
        let cluster = try Self.cluster()
        let store = try cluster.makeStore()
        let router = try Self.router(store)
        let h = try Harness(store: store)
        h.origin.route("/moving", response: .init(text: "moving body"))
        #expect(try await h.get("/moving").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        let info = try #require(try store.entryInfos().first)
        let (move, migrated) = try cluster.beginMoving(store.layout.entryKey(info.key))
        let (slot, target) = (move.slot, move.target)
        #expect(migrated.isOK, "\(migrated)")
        let redirectionsBefore = router.redirectionCount, refreshesBefore = router.refreshCount

        let asked = try await h.get("/moving")
        #expect(asked.status == .fresh && asked.text == "moving body", "read from the importing node after ASK")
        #expect(router.redirectionCount > redirectionsBefore && router.refreshCount == refreshesBefore, "ASK changes no map")

        try cluster.finishMoving(move)
        #expect(await eventually { (try? cluster.primary(serving: slot)) == target })
        let moved = try await h.get("/moving")
        #expect(moved.status == .fresh && moved.text == "moving body", "read from the new primary after MOVED")
        #expect(router.refreshCount > refreshesBefore, "MOVED had the map learned again")
        #expect(router.topology?.ranges.contains { $0.primary.port == target && ($0.first...$0.last).contains(slot) } == true)
        let redirections = router.redirectionCount
        #expect(try await h.get("/moving").status == .fresh)
        #expect(router.redirectionCount == redirections, "the new map sends it to the right node at once")
        #expect(h.origin.requestCount("/moving") == 1)
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) == 0)
    }

    @Test("failover with traffic running: a primary killed (SIGKILL); no request fails, hangs or gets a wrong body; storeFailed while it is down; hits resume once its replica is promoted, with nothing restarted; a near cache follows the promoted replica")
    func failover() async throws {
        let cluster = try Self.cluster()
        let store = try cluster.makeStore()
        let h = try Harness(store: store)
        let (_, near) = try NearFleet.pair { try cluster.makeStore(prefix: $0) }
        h.origin.route("/f") { request, _ in .init(text: "body of \(request.target)") }
        let paths = (0..<24).map { "/f?n=\($0)" }
        for path in paths { _ = try await h.get(path) }
        #expect(await h.recorder.wait(for: .stored, count: paths.count))
        let slots = try Dictionary(uniqueKeysWithValues: store.entryInfos().map {
            ($0.url.replacingOccurrences(of: h.origin.url("").absoluteString, with: ""), RedisClusterSlot.of(store.layout.entryKey($0.key)))
        })
        let victim = try #require(try cluster.shards().max { a, b in
            slots.values.filter { s in a.ranges.contains { $0.contains(s) } }.count < slots.values.filter { s in b.ranges.contains { $0.contains(s) } }.count
        })
        let replica = try #require(victim.replicas.first)
        let onVictim = Set(slots.filter { entry in victim.ranges.contains { $0.contains(entry.value) } }.keys)
        #expect(!onVictim.isEmpty)
        _ = try cluster.command(victim.primary, "WAIT", 1, 2000) // the replica has every entry

        let traffic = Traffic()
        let workers = (0..<3).map { worker in
            Task.detached { await traffic.run(h, paths: paths, offset: worker * 7) }
        }
        #expect(await eventually(timeout: 10) { traffic.count(\.fresh) >= 30 }, "hits before the kill")
        cluster.kill(victim.primary)
        traffic.phase = 1
        #expect(await h.recorder.wait(timeout: 15) { $0.contains { $0.kind.name == "storeFailed" } }, "storeFailed while the primary is down")
        let promoted = await eventually(timeout: 30) { (try? cluster.info(replica, "role")) == "master" }
        #expect(promoted, "the replica took the primary's place")
        #expect(await eventually(timeout: 20) {
            (try? cluster.info(replica, "cluster_state", section: "cluster")) == "ok"
        })
        #expect(await NearFleet.follows(near, replica, not: victim.primary), "the near cache follows the promoted replica and serves again")
        traffic.phase = 2
        #expect(await eventually(timeout: 20) { traffic.freshAfterPromotion(of: onVictim) > 0 },
                "hits resumed for the dead primary's entries, served by the promoted replica")
        // Traffic ran through the whole failover: stopped only once it has sent enough that the
        // count below says so, not when a fast promotion happens to end the test early.
        _ = await eventually(timeout: 20) { traffic.summary.requests > 100 }
        traffic.stop()
        for worker in workers { await worker.value }

        let summary = traffic.summary
        #expect(summary.failures.isEmpty, "requests that failed or got a wrong body: \(summary.failures.prefix(5))")
        #expect(summary.slowest < 5, "the slowest request took \(summary.slowest) s")
        #expect(summary.requests > 100, "\(summary.requests) requests during the test")
        try cluster.start(victim.primary) // back as a replica, for the tests after this one
        try cluster.waitUntilHealthy()
    }
}

/// Requests sent in a loop through a caching session while a test changes the cluster: what
/// came back, by phase (0 before the kill, 1 while down, 2 after promotion).
final class Traffic: Sendable {
    struct Counts {
        var fresh = 0
        var network = 0
    }

    private let state = Mutex<(phase: Int, stopped: Bool, counts: [Int: Counts], freshPaths: [Int: Set<String>],
                               failures: [String], slowest: TimeInterval, requests: Int)>((0, false, [:], [:], [], 0, 0))

    var phase: Int {
        get { state.withLock { $0.phase } }
        set { state.withLock { $0.phase = newValue } }
    }

    func stop() { state.withLock { $0.stopped = true } }

    func count(_ field: KeyPath<Counts, Int>) -> Int {
        state.withLock { $0.counts.values.reduce(0) { $0 + $1[keyPath: field] } }
    }

    /// How many of `paths` were fresh hits after the promotion.
    func freshAfterPromotion(of paths: Set<String>) -> Int {
        state.withLock { ($0.freshPaths[2] ?? []).intersection(paths).count }
    }

    var summary: (failures: [String], slowest: TimeInterval, requests: Int) {
        state.withLock { ($0.failures, $0.slowest, $0.requests) }
    }

    /// Sends requests for `paths` in turn (from `offset`) until stopped, each with a 10 s timeout.
    func run(_ h: Harness, paths: [String], offset: Int) async {
        var index = offset
        while !state.withLock({ $0.stopped }) {
            let path = paths[index % paths.count]
            index += 1
            var request = URLRequest(url: h.origin.url(path))
            request.timeoutInterval = 10
            let start = Date()
            let outcome: Result<FetchResult, any Error>
            do { outcome = .success(try await fetch(h.session, request)) } catch { outcome = .failure(error) }
            record(path, outcome, elapsed: Date().timeIntervalSince(start))
        }
    }

    private func record(_ path: String, _ outcome: Result<FetchResult, any Error>, elapsed: TimeInterval) {
        state.withLock { state in
            state.requests += 1
            state.slowest = max(state.slowest, elapsed)
            switch outcome {
            case .failure(let error):
                state.failures.append("\(path): \(error)")
            case .success(let result) where result.response.statusCode != 200 || result.text != "body of \(path)":
                state.failures.append("\(path): status \(result.response.statusCode), body '\(result.text.prefix(60))'")
            case .success(let result):
                if result.status == .fresh {
                    state.counts[state.phase, default: Counts()].fresh += 1
                    state.freshPaths[state.phase, default: []].insert(path)
                } else {
                    state.counts[state.phase, default: Counts()].network += 1
                }
            }
        }
    }
}
