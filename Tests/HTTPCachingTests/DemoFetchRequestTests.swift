import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin
@testable import cache_demo

/// `cache-demo fetch` with a method, header fields and bodies (`-X`, `-H`, `--data`,
/// `--data-file`, `--key-body`), and a path alone for the embedded origin.
@Suite("The demo's fetch requests")
struct DemoFetchRequestTests {
    static func fetch(_ arguments: [String]) throws -> FetchOptions? {
        guard case .fetch(let options) = try DemoCommand.parse(["fetch"] + arguments) else { return nil }
        return options
    }

    @Test("-X, --request, -H, repeated --data, --data-file, --key-body and a path alone are parsed")
    func parsing() throws {
        let query = try #require(try Self.fetch(["http://a.test/s", "-X", "QUERY", "--data", #"{"q":1}"#, "--data=a=b",
                                                 "-H", "Content-Type: application/json", "--header=X-Trace: 1"]))
        #expect(query.method == "QUERY" && query.effectiveMethod == "QUERY")
        #expect(query.bodies == [.text(#"{"q":1}"#), .text("a=b")], "each --data a body of its own, '=' kept")
        #expect(query.headers == [HeaderField(name: "Content-Type", value: "application/json"), HeaderField(name: "X-Trace", value: "1")])
        #expect(!query.keysBody && !query.usesEmbeddedOrigin)

        let post = try #require(try Self.fetch(["/graphql?v=2", "--data-file", "/tmp/q.json", "--data-file", "/tmp/r.json", "--key-body"]))
        #expect(post.method == nil && post.effectiveMethod == "POST", "a body without -X is a POST, as with curl")
        #expect(post.bodies == [.file("/tmp/q.json"), .file("/tmp/r.json")] && post.keysBody)
        #expect(post.usesEmbeddedOrigin && post.url.path == "/graphql" && post.url.relativeString == "/graphql?v=2")

        #expect(try Self.fetch(["http://a.test", "--request=PUT"])?.effectiveMethod == "PUT")
        #expect(try Self.fetch(["http://a.test", "-X", "QUERY", "--key-body"])?.keysBody == true, "QUERY without a body may be keyed")
        #expect(try Self.fetch(["http://a.test", "--data", ""])?.bodies == [.text("")], "an empty body is a body")
        #expect(try Self.fetch(["http://a.test", "--data", "-1"])?.bodies == [.text("-1")], "a value may begin with '-'")
        #expect(try Self.fetch(["http://a.test"])?.effectiveMethod == "GET")
        for option in ["-X, --request METHOD", "--data STRING", "--data-file PATH", "--key-body", "-H, --header"] {
            #expect(DemoCommand.usage.contains(option), "\(option)")
        }
        #expect(DemoCommand.usage.contains("Content-Type: application/x-www-form-urlencoded"))
    }

    @Test("bad request options are usage errors that say what is wrong", arguments: [
        (["fetch", "http://a.test", "--data", "a", "--data-file", "b"], "--data and --data-file cannot be used together"),
        (["fetch", "http://a.test", "--data-file", "b", "--data", "a"], "--data and --data-file cannot be used together"),
        (["fetch", "http://a.test", "-X"], "-X needs a value"),
        (["fetch", "http://a.test", "--data"], "--data needs a value"),
        (["fetch", "http://a.test", "--data-file="], "--data-file needs a file path"),
        (["fetch", "http://a.test", "-X", "BAD METHOD"], "-X takes a method such as GET, POST or QUERY, not 'BAD METHOD'"),
        (["fetch", "http://a.test", "--request", ""], "--request takes a method"),
        (["fetch", "http://a.test", "--key-body"], "a GET never has its body keyed"),
        (["fetch", "http://a.test", "-X", "HEAD", "--key-body"], "a HEAD never has its body keyed"),
        (["fetch", "http://a.test", "-H", "no colon"], "takes 'Name: value'"),
        (["fetch", "//a.test/x"], "not an http or https URL nor a /path on the embedded origin"),
        (["fetch", "/a", "/b"], "unexpected argument '/b'"),
        (["explain", "/search"], "not an http or https URL: '/search'"),
        (["explain", "http://a.test", "--data", "a"], "unknown option '--data'"),
        (["explain", "http://a.test", "--key-body"], "unknown option '--key-body'"),
    ])
    func usageErrors(arguments: [String], message: String) {
        expectUsageError(arguments, message)
    }

    @Test("the requests: one per body, in turn; the method; a form Content-Type unless -H gives one; keysBody only when asked")
    func requests() throws {
        let url = URL(string: "http://a.test/s")!
        let form = try #require(try Self.fetch(["http://a.test/s", "--data", "a", "--data", "b", "-H", "X-Trace: 1"]))
        let sent = form.requests(to: url, payloads: try form.payloads())
        #expect(sent.map { $0.httpBody.map { String(decoding: $0, as: UTF8.self) } } == ["a", "b"])
        #expect(sent.allSatisfy { $0.httpMethod == "POST" && $0.value(forHTTPHeaderField: "X-Trace") == "1" && $0.keysBody == nil })
        #expect(sent.allSatisfy { $0.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded" })
        #expect(form.requestLabels == ["POST a", "POST b"])

        let json = try #require(try Self.fetch(["http://a.test/s", "-X", "QUERY", "--data", "{}", "-H", "content-type: application/json", "--key-body"]))
        let query = try #require(json.requests(to: url, payloads: try json.payloads()).first)
        #expect(query.value(forHTTPHeaderField: "Content-Type") == "application/json", "the type given is the only one")
        #expect(query.keysBody == true && query.httpMethod == "QUERY")

        let plain = try #require(try Self.fetch(["http://a.test/s"]))
        let get = plain.requests(to: url, payloads: try plain.payloads())
        #expect(get.count == 1 && get[0].httpBody == nil && get[0].value(forHTTPHeaderField: "Content-Type") == nil)
        #expect(plain.requestLabels == ["GET"] && RequestBody.text(String(repeating: "x", count: 30)).label.count == 24)
    }

    @Test("--data-file reads the file's bytes; a missing file or a directory is an error that names it")
    func dataFiles() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("demo-body-\(UUID().uuidString)")
        try Data([0x71, 0x3D, 0x00, 0xFF]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try RequestBody.file(file.path).data() == Data([0x71, 0x3D, 0x00, 0xFF]))
        #expect(RequestBody.file(file.path).label == "@" + file.lastPathComponent)
        #expect(throws: RequestBodyError(description: "--data-file: cannot read '/nonexistent/body': no such file")) {
            try RequestBody.file("/nonexistent/body").data()
        }
        #expect(throws: RequestBodyError(description: "--data-file: cannot read '/tmp': it is a directory")) {
            try RequestBody.file("/tmp").data()
        }
    }

    @Test("the heading names the method, the embedded origin and the bodies only when there are some")
    func heading() throws {
        let get = try #require(try Self.fetch(["http://a.test/x"]))
        #expect(FetchCommand.heading(get, url: get.url).hasPrefix("fetching http://a.test/x 1 time(s); policy two-tier"))
        let query = try #require(try Self.fetch(["/s", "-X", "QUERY", "--data", "a", "--data", "b", "--repeat", "2"]))
        #expect(FetchCommand.heading(query, url: URL(string: "http://127.0.0.1:9/s")!)
                .hasPrefix("fetching QUERY http://127.0.0.1:9/s (the embedded origin) with 2 bodies in turn, 2 time(s);"))
    }

    @Test("the embedded origin's answers: what it received, an ETag of method and body, 304 when it matches")
    func embeddedOrigin() async throws {
        let origin = try #require(DemoOrigin.start(path: "/e"))
        defer { origin.stop() }
        var request = URLRequest(url: origin.url("/e?x=1"))
        request.httpMethod = "QUERY"
        request.httpBody = Data("q".utf8)
        let session = uncachedSession()
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(String(decoding: data, as: UTF8.self) == "QUERY /e?x=1 q (origin request 1)")
        let etag = try #require(http.value(forHTTPHeaderField: "ETag"))
        #expect(etag == "\"\(DemoOrigin.fingerprint(Data("QUERY".utf8) + [0] + Data("q".utf8)))\"")
        #expect(DemoOrigin.fingerprint(Data()) == "cbf29ce484222325", "FNV-1a's offset basis for no bytes")
        request.setValue(etag, forHTTPHeaderField: "If-None-Match")
        let (_, conditional) = try await session.data(for: request)
        #expect((conditional as? HTTPURLResponse)?.statusCode == 304)
    }
}
