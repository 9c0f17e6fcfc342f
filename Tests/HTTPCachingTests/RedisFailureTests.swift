import Foundation
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// The Redis store when the server is down, hung, full or refuses the credentials: a clear
/// error within the timeout, never a crash or a hang, and back to work by itself.
@Suite("Redis store failures", .redisServer)
struct RedisFailureTests {
    typealias E = StoreConformance

    /// The longest any call may take with the test configuration's 0.5 s timeouts: a wait for
    /// a free connection, a connection, a reply, and room for a loaded machine.
    static let bound: TimeInterval = 2.5

    /// Runs `body`, expecting `HTTPCachingError.unavailable` within `bound`; returns the reason.
    @discardableResult
    static func expectUnavailable(_ what: String, _ body: () throws -> Void,
                                  sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let start = Date()
        var reason = ""
        do {
            try body()
            Issue.record("\(what) succeeded", sourceLocation: sourceLocation)
        } catch let error as HTTPCachingError where error.code == .unavailable {
            let why = error.detail ?? error.description
            reason = why
        } catch {
            Issue.record("\(what) threw \(error), expected unavailable", sourceLocation: sourceLocation)
        }
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed < bound, "\(what) took \(elapsed) s", sourceLocation: sourceLocation)
        return reason
    }

    /// Every store call that talks to Redis, expected to fail as unavailable.
    static func expectEveryCallUnavailable(_ store: RedisResponseStore, sourceLocation: SourceLocation = #_sourceLocation) {
        let key = E.entry("/x").key
        expectUnavailable("entry(for:)", { _ = try store.entry(for: key) }, sourceLocation: sourceLocation)
        expectUnavailable("write", { try store.write(E.entry("/x")) }, sourceLocation: sourceLocation)
        expectUnavailable("removeEntry", { try store.removeEntry(for: key) }, sourceLocation: sourceLocation)
        expectUnavailable("removeAll", { try store.removeAll() }, sourceLocation: sourceLocation)
        expectUnavailable("removeEntries", { try store.removeEntries(storedSince: E.base) }, sourceLocation: sourceLocation)
        expectUnavailable("entryInfos", { _ = try store.entryInfos() }, sourceLocation: sourceLocation)
        expectUnavailable("ping", { try store.ping() }, sourceLocation: sourceLocation)
        let start = Date()
        #expect(!store.claimRefresh(of: key, lease: 10), "no claim without Redis", sourceLocation: sourceLocation)
        store.releaseRefresh(of: key)
        #expect(store.entryCount == 0 && store.totalBytes == 0, sourceLocation: sourceLocation)
        #expect(Date().timeIntervalSince(start) < 4 * bound, sourceLocation: sourceLocation)
    }

    @Test("a server down from the start: every call throws unavailable at once; the same store works once it is up")
    func downFromTheStart() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        server.stop()
        Self.expectEveryCallUnavailable(store)
        let reason = Self.expectUnavailable("entry(for:)") { _ = try store.entry(for: E.entry("/x").key) }
        #expect(reason.contains("127.0.0.1:\(server.port)") && reason.contains("refused"), "\(reason)")
        try server.restart()
        #expect(eventually { (try? store.ping()) != nil }, "the store reconnected by itself")
        let back = E.entry("/back")
        try store.write(back)
        #expect(try store.entry(for: back.key) == back)
    }

    @Test("killed mid-run under load from 4 threads: calls fail as unavailable within the timeout, then succeed after a restart")
    func killAndRestart() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        try store.write(E.entry("/before"))
        _ = try store.partitionSecret()
        let load = Load()
        let group = DispatchGroup()
        for worker in 0..<4 {
            DispatchQueue.global().async(group: group) {
                var i = 0
                while load.phase < 3 {
                    i += 1
                    let entry = E.entry("/w\(worker)/\(i % 10)", body: "\(i)")
                    let start = Date()
                    let outcome: Error?
                    do {
                        try store.write(entry)
                        _ = try store.entry(for: entry.key)
                        outcome = nil
                    } catch {
                        outcome = error
                    }
                    load.record(outcome, elapsed: Date().timeIntervalSince(start))
                }
            }
        }
        #expect(eventually { load.count(\.succeeded, phase: 0) >= 20 })
        server.kill()
        load.phase = 1
        #expect(eventually { load.count(\.unavailable, phase: 1) >= 20 }, "calls failed while the server was down")
        Self.expectEveryCallUnavailable(store)
        #expect(try store.partitionSecret().count == 32, "the secret, once read, is answered from memory")
        try server.restart()
        load.phase = 2
        #expect(eventually { load.count(\.succeeded, phase: 2) >= 20 }, "the same store works again")
        load.phase = 3
        #expect(group.wait(timeout: .now() + 10) == .success)
        let summary = load.summary
        #expect(summary.other.isEmpty, "errors other than unavailable: \(summary.other.prefix(3))")
        #expect(summary.slowest < Self.bound, "the slowest call took \(summary.slowest) s")
        #expect(try store.entry(for: E.entry("/before").key) == nil, "the test server keeps nothing across a restart")
    }

    @Test("a hung server (SIGSTOP): calls throw unavailable after the command timeout, never hang; fine after SIGCONT")
    func hungServer() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let x = E.entry("/x")
        try store.write(x)
        server.pause()
        let reason = Self.expectUnavailable("entry(for:)") { _ = try store.entry(for: E.entry("/x").key) }
        #expect(reason.contains("within 0.5 s"), "\(reason)")
        let start = Date()
        #expect(!store.claimRefresh(of: E.entry("/x").key, lease: 10))
        #expect(Date().timeIntervalSince(start) < Self.bound)
        Self.expectUnavailable("write") { try store.write(E.entry("/y")) }
        server.resume()
        #expect(eventually { (try? store.entry(for: x.key)) == x })
    }

    @Test("full under maxmemory with noeviction: writes are refused as not stored, reads and removals go on")
    func fullWithoutEviction() throws {
        let server = try RedisServer(["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"])
        defer { server.stop() }
        let store = try server.makeStore()
        let body = String(repeating: "m", count: 64 << 10)
        var results: [Bool] = []
        for i in 0..<100 { results.append(try store.write(E.entry("/fill/\(i)", body: body)).stored) }
        let stored = results.filter { $0 }.count
        #expect(stored > 0 && stored < 100, "\(stored) of 100 stored under a 2 MB limit")
        let firstRefused = try #require(results.firstIndex(of: false))
        #expect(try store.entry(for: E.entry("/fill/\(firstRefused)").key) == nil)
        #expect(try store.entry(for: E.entry("/fill/0").key)?.body.count == body.utf8.count)
        try store.removeAll()
        #expect(try store.write(E.entry("/after")).stored, "room again after the removal")
    }

    @Test("a response Redis has no room for is reported as notStored(storeFull), not as too large, and still answered")
    func fullReportedAsStoreFull() async throws {
        let server = try RedisServer(["--maxmemory-policy", "noeviction"])
        defer { server.stop() }
        let store = try server.makeStore()
        // A limit below what Redis uses already: every write is refused for lack of memory.
        _ = try server.command("CONFIG", "SET", "maxmemory", "1")
        let refused = try store.write(E.entry("/refused"))
        #expect(!refused.stored && refused.notStoredReason == .storeFull)
        let h = try Harness(store: store)
        h.origin.route("/full") { _, hit in .init(headers: [("Cache-Control", "max-age=60")], text: "full \(hit)") }
        #expect(try await h.get("/full").text == "full 1")
        #expect(await h.recorder.wait(for: .notStored(.storeFull)), "\(h.recorder.kinds)")
        #expect(h.recorder.count(where: { $0.notStoredReason?.name == "tooLarge" }) == 0)
    }

    @Test("full under maxmemory with an LRU policy: every write is stored, Redis evicts the oldest; volatile-lru keeps the secret",
          arguments: ["allkeys-lru", "volatile-lru"])
    func fullWithEviction(policy: String) throws {
        let server = try RedisServer(["--maxmemory", "2mb", "--maxmemory-policy", policy])
        defer { server.stop() }
        let store = try server.makeStore()
        let secret = try store.partitionSecret()
        let body = String(repeating: "l", count: 64 << 10)
        for i in 0..<100 {
            #expect(try store.write(E.entry("/fill/\(i)", body: body)).stored)
        }
        let count = store.entryCount
        #expect(count > 0 && count < 100, "\(count) entries left")
        #expect(try store.entry(for: E.entry("/fill/99").key)?.body.count == body.utf8.count)
        #expect(try store.entry(for: E.entry("/fill/0").key) == nil)
        #expect(try store.entryInfos().count <= count, "listing while Redis evicts")
        if policy == "volatile-lru" {
            #expect(try server.command("GET", store.layout.secretKey) == .bulkString(secret), "entries have TTLs, the secret has none")
        }
    }

    @Test("AUTH with a password: the right one works, a wrong or missing one is a clear error, at once")
    func password() throws {
        let server = try RedisServer(["--requirepass", "right horse"])
        defer { server.stop() }
        var configuration = server.configuration()
        configuration.password = "right horse"
        let store = try RedisResponseStore(configuration: configuration)
        let entry = E.entry("/auth")
        try store.write(entry)
        #expect(try store.entry(for: entry.key) == entry)

        configuration.password = "wrong horse"
        let wrong = try RedisResponseStore(configuration: configuration)
        let reason = Self.expectUnavailable("ping with a wrong password") { try wrong.ping() }
        #expect(reason.contains("refused to authenticate with a password") && reason.contains("WRONGPASS"), "\(reason)")
        #expect(!reason.contains("wrong horse"), "the password is never in a message")
        Self.expectEveryCallUnavailable(wrong)

        configuration.password = nil
        let none = try RedisResponseStore(configuration: configuration)
        let noAuth = Self.expectUnavailable("a read without a password") { _ = try none.entry(for: E.entry("/auth").key) }
        #expect(noAuth.contains("NOAUTH"), "\(noAuth)")

        let url = try RedisResponseStore(url: "redis://:right%20horse@127.0.0.1:\(server.port)", keyPrefix: configuration.keyPrefix)
        #expect(try url.entry(for: entry.key) == entry)
    }

    @Test("AUTH as an ACL user limited to the prefix, without dangerous commands: the whole conformance suite passes; a wrong user, password or key pattern is a clear error")
    func aclUser() throws {
        let server = try RedisServer(["--user", "cache", "on", ">cache-pw", "~acl-*", "+@all", "-@dangerous",
                                      "--user", "other", "on", ">other-pw", "~elsewhere:*", "+@all"])
        defer { server.stop() }
        func store(_ user: String, _ password: String) throws -> RedisResponseStore {
            var configuration = server.configuration(prefix: "acl-\(UUID().uuidString):")
            configuration.username = user
            configuration.password = password
            return try RedisResponseStore(configuration: configuration)
        }
        let report = try StoreConformance(makeStore: { try store("cache", "cache-pw") }, claimsAreExclusive: true).run()
        #expect(report.skippedChecks == ["evicts past its count limit", "treats damage as a miss"], "\(report)")

        for (user, password) in [("cache", "nope"), ("nobody", "cache-pw")] {
            let reason = Self.expectUnavailable("ping as \(user)") { try store(user, password).ping() }
            #expect(reason.contains("refused to authenticate as user '\(user)'") && reason.contains("WRONGPASS"), "\(reason)")
        }
        let forbidden = Self.expectUnavailable("a write outside the user's keys") { try store("other", "other-pw").write(E.entry("/x")) }
        #expect(forbidden.contains("NOPERM"), "\(forbidden)")
        let url = try RedisResponseStore(url: "redis://cache:cache-pw@127.0.0.1:\(server.port)/0", keyPrefix: "acl-url:")
        try url.ping()
    }
}

/// What the load threads of `killAndRestart` saw, by phase (0 up, 1 killed, 2 restarted, 3 done).
private final class Load: Sendable {
    struct Counts {
        var succeeded = 0
        var unavailable = 0
    }

    private let state = Mutex<(phase: Int, counts: [Int: Counts], other: [String], slowest: TimeInterval)>((0, [:], [], 0))

    var phase: Int {
        get { state.withLock { $0.phase } }
        set { state.withLock { $0.phase = newValue } }
    }

    func record(_ error: Error?, elapsed: TimeInterval) {
        state.withLock { state in
            state.slowest = max(state.slowest, elapsed)
            switch error {
            case nil: state.counts[state.phase, default: Counts()].succeeded += 1
            case let error as HTTPCachingError where error.code == .unavailable: state.counts[state.phase, default: Counts()].unavailable += 1
            case let error?: state.other.append("\(error)")
            }
        }
    }

    func count(_ field: KeyPath<Counts, Int>, phase: Int) -> Int {
        state.withLock { $0.counts[phase]?[keyPath: field] ?? 0 }
    }

    var summary: (other: [String], slowest: TimeInterval) {
        state.withLock { ($0.other, $0.slowest) }
    }
}
