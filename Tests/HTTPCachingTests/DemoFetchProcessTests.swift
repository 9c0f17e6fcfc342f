import Foundation
import Testing
import LoopbackOrigin
@testable import cache_demo

/// `cache-demo fetch` with bodies, run as a program: what it printed, how it exited, and what
/// the origin received.
@Suite("The demo's fetch with bodies, run as a program")
struct DemoFetchProcessTests {
    /// Routes `path` to answer with the method and body it received and its request count,
    /// storable for a minute.
    static func echo(_ origin: LoopbackOrigin, _ path: String) {
        origin.route(path) { request, hit in
            .init(headers: [("Cache-Control", "max-age=60")], text: "\(request.method) \(String(decoding: request.body, as: UTF8.self)) #\(hit)")
        }
    }

    /// The JSON objects of a run's output, and whether every line was one.
    static func objects(_ run: DemoProcessTests.Run) -> (objects: [[String: Any]], allJSON: Bool) {
        let lines = run.output.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return (objects, objects.count == lines.count)
    }

    @Test("QUERY: the same body again is a hit, another body a miss; the origin gets each body once, with a form Content-Type")
    func queryBodies() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        Self.echo(origin, "/q")
        let run = try await DemoProcessTests.run(["fetch", origin.url("/q").absoluteString, "-X", "QUERY",
                                                  "--data", #"{"q":1}"#, "--data", #"{"q":1}"#, "--data", #"{"q":2}"#, "--json", "--stats"])
        #expect(run.status == 0, "\(run.errors)")
        let (objects, allJSON) = Self.objects(run)
        #expect(allJSON)
        let rows = objects.filter { $0["n"] != nil }
        #expect(rows.map { $0["cache"] as? String } == ["miss", "fresh", "miss"])
        #expect(rows.allSatisfy { $0["method"] as? String == "QUERY" && $0["sent_bytes"] as? Int == 7 })
        let stats = try #require(objects.last?["stats"] as? [String: Any])
        #expect(stats["origin_requests"] as? Int == 2 && stats["stored"] as? Int == 2 && stats["entries"] as? Int == 2)
        let received = origin.requests(for: "/q")
        #expect(received.map(\.method) == ["QUERY", "QUERY"])
        #expect(received.map { String(decoding: $0.body, as: UTF8.self) } == [#"{"q":1}"#, #"{"q":2}"#])
        #expect(received.allSatisfy { $0.header("Content-Type") == "application/x-www-form-urlencoded" })
    }

    @Test("--partial: three runs over one disk store, each a range of the embedded origin's file; the third is held by the first two's parts")
    func partialRuns() async throws {
        let directory = TemporaryDirectory()
        var rows: [[String: Any]] = []
        for range in ["bytes=0-99", "bytes=100-199", "bytes=50-149"] {
            let run = try await DemoProcessTests.run(["fetch", "/movie", "--partial", "-H", "Range: \(range)",
                                                      "--store", "disk:\(directory.url.path)", "--json"])
            #expect(run.status == 0, "\(run.errors)")
            rows += Self.objects(run).objects.filter { $0["n"] != nil }
        }
        #expect(rows.map { $0["cache"] as? String } == ["miss", "miss", "fresh"])
        #expect(rows.allSatisfy { $0["status"] as? Int == 206 && $0["bytes"] as? Int == 100 })
        #expect(DemoCommand.usage.contains("--partial"))
    }

    @Test("POST passes through unless --key-body keys it; then the same body is a hit")
    func postKeyBody() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        Self.echo(origin, "/graphql")
        let url = origin.url("/graphql").absoluteString
        let body = #"{"query":"{ me }"}"#
        let plain = try await DemoProcessTests.run(["fetch", url, "--data", body, "--repeat", "2", "--json"])
        #expect(Self.objects(plain).objects.filter { $0["n"] != nil }.map { $0["cache"] as? String } == ["bypass", "bypass"])
        let keyed = try await DemoProcessTests.run(["fetch", url, "--data", body, "--repeat", "2", "--key-body", "--json",
                                                    "-H", "Content-Type: application/json"])
        #expect(keyed.status == 0)
        #expect(Self.objects(keyed).objects.filter { $0["n"] != nil }.map { $0["cache"] as? String } == ["miss", "fresh"])
        let received = origin.requests(for: "/graphql")
        #expect(received.count == 3 && received.allSatisfy { $0.method == "POST" && $0.body == Data(body.utf8) })
        #expect(received.last?.header("Content-Type") == "application/json", "-H replaces the form type")
    }

    @Test("a path alone asks the embedded origin; the table shows each request's body and the origin's count")
    func embeddedOrigin() async throws {
        let run = try await DemoProcessTests.run(["fetch", "/search", "-X", "QUERY",
                                                  "--data", #"{"q":1}"#, "--data", #"{"q":1}"#, "--data", #"{"q":2}"#])
        #expect(run.status == 0, "\(run.errors)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains("(the embedded origin) with 3 bodies in turn") == true)
        let rows = lines.filter { $0.first?.isNumber == true }.map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(rows.map { String($0[2]) } == ["miss", "fresh", "miss"])
        #expect(rows.map { $0.suffix(2).joined(separator: " ") } == [#"QUERY {"q":1}"#, #"QUERY {"q":1}"#, #"QUERY {"q":2}"#])
        #expect(lines.contains("the embedded origin received 2 requests"))
    }

    @Test("--data-file sends the file; a missing one exits 2 before any request, naming the file")
    func dataFile() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        Self.echo(origin, "/f")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("demo-body-\(UUID().uuidString).txt")
        try Data("from a file".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let sent = try await DemoProcessTests.run(["fetch", origin.url("/f").absoluteString, "-X", "QUERY", "--data-file", file.path])
        #expect(sent.status == 0 && origin.requests(for: "/f").map(\.body) == [Data("from a file".utf8)])

        let missing = try await DemoProcessTests.run(["fetch", origin.url("/f").absoluteString, "--data-file", file.path + ".missing"])
        #expect(missing.status == 2)
        #expect(missing.errors.contains("--data-file: cannot read '\(file.path).missing': no such file"))
        #expect(origin.requestCount("/f") == 1, "nothing was sent")
    }
}
