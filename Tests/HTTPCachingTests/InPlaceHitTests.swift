import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

@Suite("Disk hits in place: a page-cached entry answered on Foundation's queue, a cold one on the I/O queue, delaying no one",
       .enabled(if: inPlaceReadsWork, "the temporary directory is not on ext4, XFS or Btrfs"))
struct InPlaceHitTests {
    /// A disk store behind a recording store, a cache over it, and an origin.
    final class Setup: @unchecked Sendable {
        let directory = TemporaryDirectory()
        let disk: DiskResponseStore
        let store: PathRecordingStore
        let cache: HTTPCache
        let origin: LoopbackOrigin
        private var sessions: [URLSession] = []

        init() throws {
            disk = try DiskResponseStore(directory: directory.url)
            store = PathRecordingStore(disk)
            cache = HTTPCache(store: store)
            store.watch(cache.engine)
            origin = try LoopbackOrigin()
        }

        deinit {
            for session in sessions { session.finishTasksAndInvalidate() }
            origin.stop()
            disk.close()
        }

        /// A new session caching through `cache`.
        func session() -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(cache)
            let session = URLSession(configuration: configuration)
            sessions.append(session)
            return session
        }

        func route(_ path: String) {
            origin.routeVersioned(path, headers: [("Cache-Control", "max-age=600")])
        }

        func key(_ path: String) throws -> CacheKey {
            try cache.manage.key(for: URLRequest(url: origin.url(path)))
        }
    }

    @Test("a disk hit whose bytes are in the page cache is found in place and answered while its key's I/O queue is held")
    func pageCachedHitInPlace() async throws {
        let setup = try Setup()
        setup.route("/p")
        let session = setup.session()
        #expect(try await fetch(session, setup.origin.url("/p")).status == .miss)
        let key = try setup.key("/p")
        let before = setup.store.calls(for: key.url).count

        let hold = QueueHold(setup.cache.engine.ioQueue(for: key.url))
        let (hit, wasHeld) = try await fetch(session, setup.origin.url("/p"), noting: { hold.isHeld })
        _ = hold.release()
        #expect(hit.status == .fresh && hit.text == "v1")
        #expect(wasHeld, "answered while the only I/O queue it could have used was held")
        #expect(Array(setup.store.calls(for: key.url).dropFirst(before)) == [.inPlace(.found)], "found in place, never read on the I/O queue")
    }

    @Test("a disk entry not in the page cache is read on the I/O queue; held there, it delays no page-cached hit of another session, even one whose key shares that queue")
    func coldReadOnIOQueue() async throws {
        let setup = try Setup()
        setup.route("/cold")
        let cold = try setup.key("/cold")
        let queue = setup.cache.engine.ioQueue(for: cold.url)
        let warmPath = try #require(try (0..<1000).map { "/warm\($0)" }.first { try setup.cache.engine.ioQueue(for: setup.key($0).url) === queue })
        setup.route(warmPath)
        let warm = try setup.key(warmPath)
        let slow = setup.session(), fast = setup.session()
        #expect(try await fetch(fast, setup.origin.url("/cold")).status == .miss)
        #expect(try await fetch(fast, setup.origin.url(warmPath)).status == .miss)
        try #require(evictFromPageCache(setup.directory, cold))

        let gate = ReadGate()
        setup.store.hold(at: gate)
        let watchdog = Watchdog(after: 20) { gate.open() }
        async let blocked = fetch(slow, setup.origin.url("/cold"))
        await gate.readStarted()
        #expect(setup.store.calls(for: cold.url).suffix(2) == [.inPlace(.needsIO), .read(onIOQueue: true)],
                "not in memory: left to the I/O queue, where the read now waits")
        let before = setup.store.calls(for: warm.url).count
        let (hit, wasHeld) = try await fetch(fast, setup.origin.url(warmPath), noting: { !watchdog.fired })
        _ = watchdog.cancel()
        gate.open()
        #expect(hit.status == .fresh && hit.text == "v1")
        #expect(wasHeld, "answered while the other session's read held the same I/O queue")
        #expect(Array(setup.store.calls(for: warm.url).dropFirst(before)) == [.inPlace(.found)])
        let coldHit = try await blocked
        #expect(coldHit.status == .fresh && coldHit.text == "v1", "a hit, read from the disk on the I/O queue")
    }
}
