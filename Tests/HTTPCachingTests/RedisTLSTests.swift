import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
@testable import cache_demo
import HTTPCachingTestKit
import LoopbackOrigin

/// `rediss://`: URLs and options without a server.
@Suite("Redis TLS configuration")
struct RedisTLSConfigurationTests {
    @Test("rediss:// gives TLS with the system's CAs, and the same user, password, database and port as redis://")
    func tlsURL() throws {
        let configuration = try RedisConfiguration(url: "rediss://alice:p%40ss@cache.example.com:6380/3")
        #expect(configuration.tls == RedisTLSOptions())
        #expect(configuration.host == "cache.example.com" && configuration.port == 6380 && configuration.database == 3)
        #expect(configuration.username == "alice" && configuration.password == "p@ss")
        #expect(try RedisConfiguration(url: "REDISS://:pw@host").port == 6379)
        #expect(try RedisConfiguration(url: "redis://host").tls == nil)
        #expect(!(try RedisConfiguration(url: "rediss://host").tls!.allowsUntrustedCertificates))
    }

    @Test("the query of a rediss:// URL names the CA file and the client certificate (percent-encoded paths)")
    func tlsQuery() throws {
        let configuration = try RedisConfiguration(url: "rediss://:pw@host:7000/1?cacert=/etc/my%20ca.pem&cert=/c++.pem&key=/k%26.pem")
        #expect(configuration.tls == RedisTLSOptions(caFile: "/etc/my ca.pem", certificateFile: "/c++.pem", keyFile: "/k&.pem"))
        #expect(configuration.database == 1 && configuration.password == "pw" && configuration.port == 7000)
        let cluster = try RedisConfiguration(url: "rediss-cluster://u:p@a:7000,b:7001?cacert=/ca.pem")
        #expect(cluster.isCluster && cluster.clusterSeeds == [RedisNodeAddress(host: "b", port: 7001)])
        #expect(cluster.tls == RedisTLSOptions(caFile: "/ca.pem") && cluster.username == "u" && cluster.password == "p")
    }

    @Test("bad TLS URLs and options are clear errors", arguments: [
        ("rediss://host?insecure=1", "unknown option 'insecure'"),
        ("rediss://host?cacert=", "the option 'cacert' has no value"),
        ("rediss://u:hunter2@host?cacert", "the option 'cacert' has no value"),
        ("rediss://host#x", "a fragment is not supported"),
        ("redis://host?cacert=/ca.pem", "a query or fragment is not supported"),
        ("rediss-cluster://a:1/2", "a cluster has only database 0"),
    ])
    func badURLs(url: String, message: String) {
        do {
            _ = try RedisConfiguration(url: url)
            Issue.record("parsed \(url)")
        } catch {
            #expect(error.code == .invalidURL && error.description.contains(message), "\(error.description)")
            #expect(!error.description.contains("hunter2"))
        }
    }

    @Test("options that cannot work are refused when the store is made: a key without a certificate, a CA file that is not there")
    func badOptions() throws {
        for (options, message) in [(RedisTLSOptions(keyFile: "/k.pem"), "keyFile is set without tls.certificateFile"),
                                   (RedisTLSOptions(caFile: ""), "tls.caFile is empty"),
                                   (RedisTLSOptions(caFile: "/ca.pem", allowsUntrustedCertificates: true), "makes it unused")] {
            #expect(throws: HTTPCachingError.self) { try RedisConfiguration(tls: options).validate() }
            do {
                _ = try RedisResponseStore(configuration: RedisConfiguration(tls: options))
                Issue.record("made a store with \(options)")
            } catch {
                #expect(error.code == .invalidValue && error.description.contains(message), "\(error.description)")
            }
        }
        try #require(RedisTLSOptions.isAvailable, "OpenSSL 3 is loaded by FoundationNetworking's libcurl on this system")
        do {
            _ = try RedisResponseStore(url: "rediss://localhost?cacert=/no/such/ca.pem")
            Issue.record("made a store with a missing CA file")
        } catch {
            #expect(error.code == .invalidValue && error.description.contains("the CA file '/no/such/ca.pem' could not be loaded"),
                    "\(error.description)")
        }
    }

    @Test("a TLS cluster's nodes are reached on their tls-port (CLUSTER SHARDS), a plain one's on their port")
    func clusterTLSPorts() throws {
        func node(_ fields: [(String, RESPValue)]) -> RESPValue {
            .array(fields.flatMap { [RESPValue.bulkString(Array($0.0.utf8)), $0.1] })
        }
        let text = { (value: String) in RESPValue.bulkString(Array(value.utf8)) }
        let both = node([("id", text("a")), ("port", .integer(7000)), ("tls-port", .integer(7100)), ("ip", text("10.0.0.1")),
                         ("endpoint", text("10.0.0.1")), ("role", text("master"))])
        let tlsOnly = node([("id", text("b")), ("tls-port", .integer(7101)), ("ip", text("10.0.0.2")),
                            ("endpoint", text("10.0.0.2")), ("role", text("master"))])
        let reply = RESPValue.array([
            .array([text("slots"), .array([.integer(0), .integer(8000)]), text("nodes"), .array([both])]),
            .array([text("slots"), .array([.integer(8001), .integer(16_383)]), text("nodes"), .array([tlsOnly])]),
        ])
        let secure = try RedisClusterTopology(shards: reply, askedHost: "h", tls: true)
        #expect(secure.primaries == [RedisNodeAddress(host: "10.0.0.1", port: 7100), RedisNodeAddress(host: "10.0.0.2", port: 7101)])
        #expect(secure.coveredSlotCount == 16_384)
        let plain = try RedisClusterTopology(shards: reply, askedHost: "h")
        #expect(plain.primaries == [RedisNodeAddress(host: "10.0.0.1", port: 7000)], "a node with no plain port serves no plain client")
    }

    @Test("where OpenSSL 3 cannot be loaded, the error names the libraries and the package to install")
    func missingLibrary() throws {
        guard case .failure(let error) = OpenSSL.load(ssl: "libssl-not-here.so.3", crypto: "libcrypto-not-here.so.3") else {
            Issue.record("loaded libraries that do not exist")
            return
        }
        #expect(error.code == .unavailable)
        #expect(error.description.contains("libssl-not-here.so.3") && error.description.contains("apt-get install libssl3"), "\(error)")
        // A library that loads but is not libssl: the missing function is named.
        guard case .failure(let wrong) = OpenSSL.load(ssl: "libz.so.1", crypto: "libcrypto.so.3") else {
            Issue.record("took libz for libssl")
            return
        }
        #expect(wrong.description.contains("lacks TLS_client_method") && wrong.description.contains("libssl3"), "\(wrong)")
    }

    @Test("cache-demo takes --store rediss://... and says so in its usage")
    func demoOption() throws {
        let url = "rediss://:pw@127.0.0.1:6380/2?cacert=/ca.pem"
        #expect(try DemoCommand.parse(["--store", url]) == .walkthrough(.redis(url: url)))
        #expect(StoreChoice.redis(url: url).label == "rediss 127.0.0.1:6380 db 2 (keys under cache-demo:)")
        #expect(DemoCommand.usage.contains("rediss://"))
    }
}

/// `rediss://` against real `redis-server`s with TLS ports, certificates from a throwaway CA.
@Suite("Redis over TLS", .redisTLS)
struct RedisTLSTests {
    typealias E = StoreConformance

    static func certificates() throws -> TestCertificates { try TestCertificates.shared.get() }

    /// A server with a TLS port only, showing `certificate` (the one for 127.0.0.1 and
    /// localhost by default), reached by `configuration()` with the test CA trusted.
    static func server(certificate: String? = nil, key: String? = nil, clientCertificates: Bool = false) throws -> RedisServer {
        let files = try certificates()
        return try RedisServer(["--tls-cert-file", certificate ?? files.serverCertificate, "--tls-key-file", key ?? files.serverKey,
                                "--tls-ca-cert-file", files.caFile, "--tls-auth-clients", clientCertificates ? "yes" : "no"],
                               tls: RedisTLSOptions(caFile: files.caFile, certificateFile: clientCertificates ? files.clientCertificate : nil,
                                                    keyFile: clientCertificates ? files.clientKey : nil))
    }

    @Test("through URLSession with a rediss:// store: a miss stored in Redis over TLS, then a hit from it")
    func missThenHit() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let url = "rediss://127.0.0.1:\(server.port)/2?cacert=\(try Self.certificates().caFile)"
        let store = try RedisResponseStore(url: url, keyPrefix: "tls-\(UUID().uuidString):")
        #expect(store.configuration.tls != nil)
        let h = try Harness(store: store)
        h.origin.route("/tls", response: .init(headers: [("Cache-Control", "max-age=600")], body: Data("over tls".utf8)))
        #expect(try await h.get("/tls").status == .miss)
        #expect(await h.recorder.wait(for: .stored))
        #expect(try server.command("DBSIZE", database: 2) != .integer(0), "the entry is in Redis, database 2")
        let hit = try await h.get("/tls")
        #expect(hit.status == .fresh && hit.text == "over tls")
        // A second store reads it from Redis, not from the first one's memory.
        let other = try RedisResponseStore(url: url, keyPrefix: store.configuration.keyPrefix)
        #expect(try other.entryInfos().count == 1)
        #expect(h.origin.requestCount("/tls") == 1)
        #expect(h.recorder.count(where: { $0.name == "storeFailed" }) == 0)
    }

    @Test("a near cache over TLS: its invalidation connection speaks TLS too, so memory serves, and drops what another store replaces")
    func nearCacheOverTLS() throws {
        let server = try Self.server()
        defer { server.stop() }
        let url = "rediss://127.0.0.1:\(server.port)?cacert=\(try Self.certificates().caFile)"
        let prefix = "tls-near-\(UUID().uuidString):"
        let writer = try RedisResponseStore(url: url, keyPrefix: prefix)
        let near = TieredResponseStore(back: try RedisResponseStore(url: url, keyPrefix: prefix))
        #expect(eventually(timeout: 10) { near.servesFromMemory }, "tracking is on over TLS")
        let link = URL(string: "http://near.test/tls")!
        func entry(_ body: String) -> CacheEntry {
            CacheEntry(key: CacheKey(url: link), url: link, statusCode: 200, headers: [:], body: Data(body.utf8), storedAt: Date())
        }
        try writer.write(entry("v1"))
        #expect(eventually(timeout: 5) { _ = try? near.entry(for: CacheKey(url: link)); return near.memory.entry(for: CacheKey(url: link)) != nil })
        try writer.write(entry("v2"))
        #expect(eventually(timeout: 5) { near.memory.entry(for: CacheKey(url: link))?.body != Data("v1".utf8) }, "the replaced entry left memory")
        #expect(try near.entry(for: CacheKey(url: link))?.body == Data("v2".utf8))
    }

    @Test("the store's calls over TLS: conformance, a host name checked by name (SNI), and 8 threads sharing the pool")
    func conformanceAndConcurrency() throws {
        let server = try Self.server()
        defer { server.stop() }
        let report = try server.conformanceReport()
        #expect(report.skippedChecks == ["evicts past its count limit"], "\(report)")
        var byName = server.configuration()
        byName.host = "localhost"
        let store = try RedisResponseStore(configuration: byName)
        try store.ping()
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<40 {
                let entry = E.entry("/t\(worker)/\(i % 5)", body: String(repeating: "\(worker)", count: 1 + i * 997 % 70_000))
                do {
                    try store.write(entry)
                    if try store.entry(for: entry.key) != entry { failures.withLock { $0 += 1 } }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(failures.withLock { $0 } == 0)
        #expect(store.entryCount == 40)
    }

    @Test("a certificate no trusted CA signed: the store fails cleanly, the request goes to the network with storeFailed, no hang")
    func untrusted() async throws {
        let server = try Self.server()
        defer { server.stop() }
        var configuration = server.configuration()
        configuration.tls = RedisTLSOptions() // the system's CAs, which never signed the test CA
        let store = try RedisResponseStore(configuration: configuration)
        let reason = RedisFailureTests.expectUnavailable("ping") { try store.ping() }
        #expect(reason.contains("certificate") && reason.contains("127.0.0.1:\(server.port)"), "\(reason)")
        let h = try Harness(store: store)
        h.origin.route("/untrusted", response: .init(headers: [("Cache-Control", "max-age=600")], body: Data("from origin".utf8)))
        for _ in 0..<2 {
            let start = Date()
            let result = try await h.get("/untrusted")
            #expect(result.text == "from origin" && result.response.statusCode == 200)
            // Loose: under the whole suite's load a request through URLSession alone can take
            // seconds; the store's own calls are bounded tightly above.
            let elapsed = Date().timeIntervalSince(start)
            #expect(elapsed < 60, "\(elapsed) s: \(h.recorder.events)")
        }
        #expect(h.origin.requestCount("/untrusted") == 2)
        #expect(await h.recorder.wait { $0.contains { $0.kind.name == "storeFailed" } })
        let failure = try #require(h.recorder.events.first { $0.kind.name == "storeFailed" })
        #expect(failure.kind.reason?.contains("certificate") == true, "\(failure.kind)")
    }

    @Test("a certificate for another host name is refused, even from a trusted CA")
    func wrongHostName() throws {
        let files = try Self.certificates()
        let server = try Self.server(certificate: files.otherNameCertificate, key: files.otherNameKey)
        defer { server.stop() }
        for host in ["127.0.0.1", "localhost"] {
            var configuration = server.configuration()
            configuration.host = host
            let reason = RedisFailureTests.expectUnavailable("ping \(host)") { try RedisResponseStore(configuration: configuration).ping() }
            #expect(reason.contains("hostname mismatch") || reason.contains("IP address mismatch"), "\(reason)")
        }
        var untrusting = server.configuration()
        untrusting.tls = RedisTLSOptions(allowsUntrustedCertificates: true)
        try RedisResponseStore(configuration: untrusting).ping() // what the loud option is for
    }

    @Test("a TLS port reached with redis://, and a plain port with rediss://: unavailable within the timeouts, never a hang")
    func wrongProtocol() throws {
        let tlsServer = try Self.server()
        defer { tlsServer.stop() }
        var plain = tlsServer.configuration()
        plain.tls = nil
        RedisFailureTests.expectUnavailable("redis:// to a TLS port") { try RedisResponseStore(configuration: plain).ping() }
        let plainServer = try RedisServer()
        defer { plainServer.stop() }
        var secure = plainServer.configuration()
        secure.tls = RedisTLSOptions(caFile: try Self.certificates().caFile)
        let reason = RedisFailureTests.expectUnavailable("rediss:// to a plain port") { try RedisResponseStore(configuration: secure).ping() }
        #expect(reason.contains("TLS"), "\(reason)")
    }

    @Test("a server stopped mid-handshake or mid-command (SIGSTOP): calls fail within the timeouts, and work once it resumes")
    func timeouts() throws {
        let server = try Self.server()
        defer { server.stop() }
        let working = try server.makeStore()
        try working.write(E.entry("/kept"))
        server.pause()
        RedisFailureTests.expectUnavailable("a command on an open TLS connection") { _ = try working.entry(for: E.entry("/kept").key) }
        let fresh = try server.makeStore()
        let reason = RedisFailureTests.expectUnavailable("a TLS handshake") { try fresh.ping() }
        #expect(reason.contains("TLS handshake") || reason.contains("timed out"), "\(reason)")
        server.resume()
        #expect(eventually { (try? working.entry(for: E.entry("/kept").key)) != nil })
        #expect(eventually { (try? fresh.ping()) != nil })
    }

    @Test("a server that asks for client certificates (tls-auth-clients yes): refused without one, served with one")
    func clientCertificate() throws {
        let server = try Self.server(clientCertificates: true)
        defer { server.stop() }
        var without = server.configuration()
        without.tls = RedisTLSOptions(caFile: try Self.certificates().caFile)
        let reason = RedisFailureTests.expectUnavailable("no client certificate") { try RedisResponseStore(configuration: without).ping() }
        #expect(reason.contains("TLS"), "\(reason)")
        let store = try server.makeStore()
        try store.ping()
        let entry = E.entry("/client")
        let written = try store.write(entry)
        let read = try store.entry(for: entry.key)
        #expect(read == entry, "\(written) \(String(describing: read))")
    }

    @Test("cache-demo --store rediss://...?cacert=...: a fetch stores there over TLS, and stats reads it back")
    func demo() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/demo-tls")
        let store = "rediss://127.0.0.1:\(server.port)/4?cacert=\(try Self.certificates().caFile)"
        let fetched = try await DemoProcessTests.run(["fetch", origin.url("/demo-tls").absoluteString, "--store", store])
        #expect(fetched.status == 0, "\(fetched.output)")
        let run = try await DemoProcessTests.run(["stats", "--store", store])
        #expect(run.status == 0)
        #expect(run.output.contains("store    rediss 127.0.0.1:\(server.port) db 4 (keys under cache-demo:)\nentries  1\n"), "\(run.output)")
    }
}
