import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Every file under a directory, read whole. An empty file is not read: there is nothing in
/// it, and FoundationEssentials 6.3.1's `FileManager.contents(atPath:)` leaks a 4 KiB buffer
/// reading one (the AddressSanitizer run reports it).
func filesUnder(_ directory: URL) -> [(path: String, bytes: Data)] {
    guard let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return [] }
    var files: [(path: String, bytes: Data)] = []
    for case let url as URL in enumerator {
        var info = stat()
        guard stat(url.path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
        if info.st_size == 0 {
            files.append((url.path, Data()))
        } else if let bytes = FileManager.default.contents(atPath: url.path) {
            files.append((url.path, bytes))
        }
    }
    return files
}

/// Issue 10: credentials never leave their partition, and never reach the store in clear.
@Suite("Credentials: partitions and what reaches the store")
struct CredentialPartitioningTests {
    /// A URL of the origin with userinfo in it.
    static func url(_ origin: LoopbackOrigin, user: String? = nil, password: String? = nil, path: String = "/secret") -> URL {
        var components = URLComponents(url: origin.url(path), resolvingAgainstBaseURL: false)!
        components.user = user
        components.password = password
        return components.url!
    }

    @Test("URL userinfo joins the credential partition: no key, stored URL or file in a disk store carries the password")
    func userinfo() async throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let h = try Harness(store: store)
        h.origin.route("/secret") { _, hit in .init(headers: [("Content-Type", "text/plain")], text: "answer \(hit)") }
        let alice = Self.url(h.origin, user: "alice", password: "PASSWORD")

        let first = try await fetch(h.session, alice)
        #expect(first.status == .miss && first.text == "answer 1")
        let again = try await fetch(h.session, alice)
        #expect(again.status == .fresh && again.text == "answer 1", "the same credentials find their entry")
        #expect(try await fetch(h.session, Self.url(h.origin, user: "alice", password: "S3CRET-TWO")).text == "answer 2",
                "another password is another partition")
        #expect(try await fetch(h.session, Self.url(h.origin)).text == "answer 3", "no userinfo: no partition")
        #expect(h.cache.entryCount == 3)

        for info in try h.cache.entryInfos() {
            #expect(!info.key.url.contains("@") && !info.key.url.contains("PASSWORD"), "\(info.key)")
        }
        let entry = try #require(h.cache.manage.cachedEntry(for: URLRequest(url: alice)))
        #expect(entry.key.partition != nil)
        #expect(entry.url.user == nil && entry.url.password == nil && !entry.url.absoluteString.contains("PASSWORD"),
                "the stored URL comes from the response's, which carries the userinfo: \(entry.url)")

        let files = filesUnder(directory.url)
        #expect(files.contains { $0.path.hasSuffix("index.log") }, "the index was written")
        #expect(files.count >= 4)
        for secret in ["PASSWORD", "S3CRET-TWO", Data("alice:PASSWORD".utf8).base64EncodedString()] {
            for file in files {
                #expect(file.bytes.range(of: Data(secret.utf8)) == nil, "\(secret) found in \(file.path)")
            }
        }
    }

    @Test("Vary on a credential field: the stored entry keeps a digest of its value, never the value; requests still match on it")
    func varyOnCredentials() async throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let h = try Harness(store: store)
        h.origin.route("/v") { request, hit in
            .init(headers: [("Vary", "Cookie, Authorization")], text: "for \(request.header("Cookie") == nil ? "nobody" : "someone") \(hit)")
        }
        #expect(try await h.get("/v", headers: ["Cookie": "sid=COOKIE-SECRET", "Authorization": "Bearer TOKEN-SECRET"]).text == "for someone 1")
        let hit = try await h.get("/v", headers: ["Cookie": "sid=COOKIE-SECRET", "Authorization": "Bearer TOKEN-SECRET"])
        #expect(hit.status == .fresh && hit.text == "for someone 1")
        #expect(try await h.get("/v").text == "for nobody 2")
        let entry = try #require(h.cache.manage.cachedEntry(for: {
            var request = URLRequest(url: h.origin.url("/v"))
            request.setValue("sid=COOKIE-SECRET", forHTTPHeaderField: "Cookie")
            request.setValue("Bearer TOKEN-SECRET", forHTTPHeaderField: "Authorization")
            return request
        }()))
        #expect(entry.varyValues.keys.sorted() == ["authorization", "cookie"])
        #expect(!entry.varyValues.values.contains { $0.contains("SECRET") })
        for file in filesUnder(directory.url) {
            for secret in ["COOKIE-SECRET", "TOKEN-SECRET"] {
                #expect(file.bytes.range(of: Data(secret.utf8)) == nil, "\(secret) found in \(file.path)")
            }
        }
    }

    /// Two sessions on one cache, each adding its own value of `header`.
    static func sessions(_ cache: HTTPCache, header: String, values: (String, String)) -> (URLSession, URLSession) {
        func session(_ value: String) -> URLSession {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpAdditionalHeaders = [header: value]
            configuration.enableHTTPCaching(cache)
            return URLSession(configuration: configuration)
        }
        return (session(values.0), session(values.1))
    }

    /// Routes `/me` to a body naming the value of `header` the origin received.
    static func routeEcho(_ origin: LoopbackOrigin, _ header: String) {
        origin.route("/me") { request, _ in .init(text: "for \(request.header(header) ?? "nobody")") }
    }

    @Test("by default, API keys and every other field a session adds partition: session B never gets session A's response",
          arguments: ["X-API-Key", "Api-Key", "X-Auth-Token", "Ocp-Apim-Subscription-Key", "X-Tenant-Token", "X-Anything-At-All"])
    func sessionFieldsPartition(header: String) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        Self.routeEcho(origin, header)
        let cache = HTTPCache(now: TestClock().closure)
        let (a, b) = Self.sessions(cache, header: header, values: ("A-SECRET", "B-SECRET"))
        defer { a.finishTasksAndInvalidate(); b.finishTasksAndInvalidate() }
        #expect(try await fetch(a, origin.url("/me")).text == "for A-SECRET")
        let other = try await fetch(b, origin.url("/me"))
        #expect(other.text == "for B-SECRET" && other.status == .miss, "\(header): B is not served A's response")
        let mine = try await fetch(a, origin.url("/me"))
        #expect(mine.text == "for A-SECRET" && mine.status == .fresh, "each partition is still cached")
        #expect(cache.entryCount == 2)
        for info in try cache.entryInfos() {
            #expect(info.key.partition != nil && !info.key.description.contains("SECRET"))
        }
    }

    @Test("harmless fields a session adds (User-Agent, Accept-Language, ...) do not partition: the sessions share the entry",
          arguments: ["User-Agent", "Accept-Language", "Accept"])
    func harmlessSessionFields(header: String) async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/shared")
        let cache = HTTPCache(now: TestClock().closure)
        let (a, b) = Self.sessions(cache, header: header, values: ("one", "two"))
        defer { a.finishTasksAndInvalidate(); b.finishTasksAndInvalidate() }
        #expect(try await fetch(a, origin.url("/shared")).text == "v1")
        let shared = try await fetch(b, origin.url("/shared"))
        #expect(shared.text == "v1" && shared.status == .fresh)
    }

    @Test("on the request itself, the standard credential fields partition by default; other fields do not")
    func requestFields() async throws {
        let h = try Harness()
        h.origin.route("/me") { request, _ in .init(text: "key \(request.header("X-API-Key") ?? "-") tenant \(request.header("X-Tenant") ?? "-")") }
        #expect(try await h.get("/me", headers: ["X-API-Key": "A"]).text == "key A tenant -")
        #expect(try await h.get("/me", headers: ["X-API-Key": "B"]).text == "key B tenant -")
        #expect(try await h.get("/me", headers: ["X-Tenant": "1"]).text == "key - tenant 1")
        let shared = try await h.get("/me", headers: ["X-Tenant": "2"])
        #expect(shared.status == .fresh && shared.text == "key - tenant 1", "a field no one listed is not a credential")
    }

    @Test("a custom partitioning: its own list of fields, session fields not partitioning unless listed, its own harmless list")
    func customPartitioning() async throws {
        let configuration = CacheConfiguration(partitioning: CredentialPartitioning(headers: ["X-Tenant"], includesSessionHeaders: false))
        let h = try Harness(configuration: configuration)
        h.origin.route("/me") { request, _ in .init(text: "tenant \(request.header("X-Tenant") ?? "-") key \(request.header("X-API-Key") ?? "-")") }
        #expect(try await h.get("/me", headers: ["X-Tenant": "1"]).text == "tenant 1 key -")
        #expect(try await h.get("/me", headers: ["X-Tenant": "2"]).text == "tenant 2 key -", "the listed field partitions")

        // Session fields: the listed one partitions, others do not (includesSessionHeaders is false).
        let origin = h.origin
        let (tenantA, tenantB) = Self.sessions(h.cache, header: "X-Tenant", values: ("3", "4"))
        let (keyA, keyB) = Self.sessions(h.cache, header: "X-API-Key", values: ("A", "B"))
        defer { [tenantA, tenantB, keyA, keyB].forEach { $0.finishTasksAndInvalidate() } }
        #expect(try await fetch(tenantA, origin.url("/me")).text == "tenant 3 key -")
        #expect(try await fetch(tenantB, origin.url("/me")).text == "tenant 4 key -")
        #expect(try await fetch(keyA, origin.url("/me")).text == "tenant - key A")
        let unlisted = try await fetch(keyB, origin.url("/me"))
        #expect(unlisted.status == .fresh && unlisted.text == "tenant - key A", "X-API-Key is not listed in this configuration")

        // A harmless list of one's own: a session field on it does not partition, others do.
        let quiet = CredentialPartitioning(harmlessSessionHeaders: CredentialPartitioning.standardHarmlessSessionHeaders.union(["X-Client-Version"]))
        let cache = HTTPCache(configuration: CacheConfiguration(partitioning: quiet))
        Self.routeEcho(origin, "X-Client-Version")
        let (v1, v2) = Self.sessions(cache, header: "X-Client-Version", values: ("1.0", "2.0"))
        defer { v1.finishTasksAndInvalidate(); v2.finishTasksAndInvalidate() }
        #expect(try await fetch(v1, origin.url("/me")).text == "for 1.0")
        #expect(try await fetch(v2, origin.url("/me")).text == "for 1.0")
    }
}
