import Foundation
import Testing
import LoopbackOrigin
@testable import cache_demo

/// `cache-demo stats --store STORE`: what a store holds, read without the network.
@Suite("The demo's stats command")
struct DemoStoreStatsTests {
    @Test("a memory store is reported empty, and says why; a disk directory that does not exist is not made")
    func empty() async throws {
        let memory = try await DemoProcessTests.run(["stats"])
        #expect(memory.status == 0)
        #expect(memory.output.contains("store    memory\nentries  0\nbytes    0\nempty: a memory store lives only as long as the process"))
        #expect(!memory.output.contains("oldest"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-demo-none-\(UUID().uuidString)")
        let none = try await DemoProcessTests.run(["stats", "--store", "disk:\(directory.path)", "--json"])
        #expect(none.status == 0 && !FileManager.default.fileExists(atPath: directory.path))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(none.output.utf8)) as? [String: Any])
        #expect(object["entries"] as? Int == 0 && object["oldest"] is NSNull && (object["empty_because"] as? String)?.contains("no store at") == true)

        let bad = try await DemoProcessTests.run(["stats", "--store", "cloud"])
        #expect(bad.status == 2 && bad.errors.contains("--store takes"))
    }

    @Test("a disk store written by two fetches: its entries, bytes, oldest and newest")
    func disk() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/first", prefix: "one")
        origin.routeVersioned("/second", prefix: "second")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-demo-stats-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = "disk:\(directory.path)"
        try await fill(store, origin)

        let text = try await DemoProcessTests.run(["stats", "--store", store])
        #expect(text.status == 0 && origin.requestCount() == 2, "nothing fetched by stats")
        let lines = text.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "store    disk \(directory.path)" && lines.contains("entries  2"))
        #expect(lines.contains { $0.hasPrefix("oldest   \(origin.url("/first").absoluteString), stored ") && $0.contains(" s ago), status 200, ") })
        #expect(lines.contains { $0.hasPrefix("newest   \(origin.url("/second").absoluteString), stored ") })

        let json = try await DemoProcessTests.run(["stats", "--store", store, "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        let oldest = try #require(object["oldest"] as? [String: Any]), newest = try #require(object["newest"] as? [String: Any])
        #expect(object["entries"] as? Int == 2 && (object["bytes"] as? Int ?? 0) >= (oldest["bytes"] as? Int ?? 0) + (newest["bytes"] as? Int ?? 0))
        #expect(oldest["url"] as? String == origin.url("/first").absoluteString && newest["url"] as? String == origin.url("/second").absoluteString)
        let formatter = ISO8601DateFormatter()
        let older = try #require(formatter.date(from: oldest["stored_at"] as? String ?? "")), newer = try #require(formatter.date(from: newest["stored_at"] as? String ?? ""))
        #expect(older <= newer && abs(newer.timeIntervalSinceNow) < 600)
    }

    @Test("a Redis store: the entries a fetch stored there", .redisServer)
    func redis() async throws {
        let server = try RedisServer()
        defer { server.stop() }
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/r")
        let store = "redis://127.0.0.1:\(server.port)/3"
        #expect(try await DemoProcessTests.run(["fetch", origin.url("/r").absoluteString, "--store", store]).status == 0)
        let run = try await DemoProcessTests.run(["stats", "--store", store])
        #expect(run.status == 0)
        #expect(run.output.contains("store    redis 127.0.0.1:\(server.port) db 3 (keys under cache-demo:)\nentries  1\n"))
        #expect(run.output.contains("oldest   \(origin.url("/r").absoluteString), stored ") && run.output.contains("newest   "))
    }

    /// Fetches `/first`, then `/second`, into the store, each in a process of its own.
    private func fill(_ store: String, _ origin: LoopbackOrigin) async throws {
        for path in ["/first", "/second"] {
            #expect(try await DemoProcessTests.run(["fetch", origin.url(path).absoluteString, "--store", store]).status == 0)
        }
    }
}
