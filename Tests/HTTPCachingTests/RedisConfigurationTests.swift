import Foundation
import Testing
@testable import HTTPCaching
@testable import cache_demo
import HTTPCachingTestKit

/// The Redis store's configuration, URL, key layout, time-to-live rule and metadata, without a server.
@Suite("Redis configuration and layout")
struct RedisConfigurationTests {
    typealias E = StoreConformance

    @Test("redis:// URLs give host, port, user, password and database", arguments: [
        ("redis://localhost", "localhost", 6379, nil, nil, 0),
        ("redis://127.0.0.1:6380", "127.0.0.1", 6380, nil, nil, 0),
        ("redis://cache.internal:6379/3", "cache.internal", 6379, nil, nil, 3),
        ("redis://:s3cret@host:1234/0", "host", 1234, nil, "s3cret", 0),
        ("redis://alice:p%40ss%3Aword@host:6379/15", "host", 6379, "alice", "p@ss:word", 15),
        ("REDIS://Host/", "host", 6379, nil, nil, 0),
        ("redis://[::1]:7000", "::1", 7000, nil, nil, 0),
    ] as [(String, String, Int, String?, String?, Int)])
    func validURLs(url: String, host: String, port: Int, user: String?, password: String?, database: Int) throws {
        let configuration = try RedisConfiguration(url: url)
        #expect(configuration.host.lowercased() == host)
        #expect(configuration.port == port)
        #expect(configuration.username == user)
        #expect(configuration.password == password)
        #expect(configuration.database == database)
        #expect(configuration.keyPrefix == RedisConfiguration.defaultKeyPrefix)
    }

    @Test("bad URLs are clear errors that never show the password", arguments: [
        ("http://localhost:6379", "not a redis://, rediss://, redis-cluster://, rediss-cluster:// or redis-sentinel:// URL"),
        ("rediss://localhost:6380?verify=none", "unknown option 'verify'"),
        ("redis://", "no host"),
        ("redis://host:abc", "the port 'abc' is not a number"),
        ("redis://host:0", "the port '0' is not a number between 1 and 65535"),
        ("redis://host:70000", "between 1 and 65535"),
        ("redis://host:", "the port '' is not a number"),
        ("redis://host/x", "the database 'x' is not a number"),
        ("redis://host/-1", "the database '-1' is not a number"),
        ("redis://host/1?timeout=5", "a query or fragment is not supported"),
        ("redis://alice@host", "a user without a password"),
        ("redis://alice:hunter2@host:x", "redis://alice:***@host:x"),
    ])
    func invalidURLs(url: String, message: String) {
        Self.expectRefused(url, saying: message)
    }

    /// Expects `url` to be refused with an error containing `message` and never the password
    /// `hunter2` (the rows of the URL tests for every kind of Redis URL).
    static func expectRefused(_ url: String, saying message: String) {
        do {
            _ = try RedisConfiguration(url: url)
            Issue.record("parsed \(url)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
            #expect(!error.description.contains("hunter2"))
        }
    }

    @Test("a store refuses a configuration out of range, naming the field")
    func validation() {
        var configuration = RedisConfiguration()
        configuration.poolSize = 0
        #expect(throws: HTTPCachingError.invalidValue("poolSize 0 is less than 1")) { try RedisResponseStore(configuration: configuration) }
        configuration = RedisConfiguration(keyPrefix: "")
        #expect(throws: HTTPCachingError.invalidValue("the key prefix is empty")) { try RedisResponseStore(configuration: configuration) }
        configuration = RedisConfiguration(commandTimeout: 0)
        #expect(throws: HTTPCachingError.self) { try RedisResponseStore(configuration: configuration) }
        #expect(throws: Never.self) { try RedisResponseStore(url: "redis://localhost:6379/2", keyPrefix: "x:") }
    }

    @Test("the time to live is usefulUntil - storedAt from the entry's own times, capped; the cap without an end")
    func timeToLive() {
        let old = Date(timeIntervalSince1970: 1_000_000) // long past: the wall clock must not matter
        let week: TimeInterval = 7 * 86_400
        func ttl(_ usefulUntil: Date?, cap: TimeInterval = week) -> Int? {
            RedisEntryLayout.timeToLive(of: E.entry("/t", storedAt: old, usefulUntil: usefulUntil), cap: cap)
        }
        #expect(ttl(old.addingTimeInterval(60)) == 60_000)
        #expect(ttl(old.addingTimeInterval(0.0004)) == 1, "rounded up to a whole millisecond")
        #expect(ttl(old.addingTimeInterval(30 * 86_400)) == Int(week * 1000), "capped")
        #expect(ttl(nil) == Int(week * 1000), "no known end: the cap")
        #expect(ttl(nil, cap: 3600) == 3_600_000)
        #expect(ttl(old) == nil && ttl(old.addingTimeInterval(-5)) == nil, "of no use: not stored")
        #expect(ttl(Date(timeIntervalSince1970: .nan)) == nil && ttl(Date(timeIntervalSince1970: 1e20), cap: .greatestFiniteMagnitude) == 1_000_000_000_000_000)
    }

    @Test("keys live under the prefix; the SCAN pattern escapes the prefix's glob characters")
    func keyLayout() {
        let layout = RedisEntryLayout(prefix: "a*b?[c]\\:")
        let key = E.entry("/k").key
        let entryKey = String(decoding: layout.entryKey(key), as: UTF8.self)
        let entryPrefix = "a*b?[c]\\:e\(EntryFileFormat.version)-\(RedisEntryMetadata.version):"
        #expect(entryKey.hasPrefix(entryPrefix + "{") && entryKey.count == entryPrefix.count + 66, "\(entryKey)")
        #expect(String(decoding: layout.claimKey(key), as: UTF8.self).hasPrefix("a*b?[c]\\:claim:"))
        #expect(String(decoding: layout.secretKey, as: UTF8.self) == "a*b?[c]\\:secret")
        #expect(String(decoding: layout.entryPattern, as: UTF8.self) == "a\\*b\\?\\[c\\]\\\\:e*")
        var other = key
        other.namespace = "n"
        #expect(layout.entryKey(other) != layout.entryKey(key), "every part of the key makes its own Redis key")
    }

    @Test("entry metadata round-trips every listed field and the whole key; damaged metadata is an error")
    func metadata() throws {
        var entry = E.entry("/m?q=1", usefulUntil: E.base.addingTimeInterval(99), statusCode: 203)
        entry.key.partition = CredentialPartition(rawValue: "00ff")
        entry.key.variant = "accept=json"
        entry.key.namespace = "tenant"
        let metadata = RedisEntryMetadata(entry)
        let decoded = try RedisEntryMetadata(decoding: metadata.encoded)
        #expect(decoded == metadata)
        #expect(decoded.info == StoredEntryInfo(entry))
        #expect(decoded.generation == entry.generation)
        var noEnd = entry
        noEnd.usefulUntil = nil
        #expect(try RedisEntryMetadata(decoding: RedisEntryMetadata(noEnd).encoded).usefulUntil == nil)
        // Times the clock really gives (sub-microsecond parts) come back bit for bit: the store
        // checks them against the entry's own and a rounding would read as damage.
        for offset in [0.1, 1e-7, 123.456789123, 765_432.000_000_9] {
            var precise = entry
            precise.storedAt = Date().addingTimeInterval(offset)
            precise.usefulUntil = precise.storedAt.addingTimeInterval(offset)
            let back = try RedisEntryMetadata(decoding: RedisEntryMetadata(precise).encoded)
            #expect(back.storedAt == precise.storedAt && back.usefulUntil == precise.usefulUntil)
        }
        let bytes = metadata.encoded
        for cut in [0, 3, 20, 33] {
            #expect(throws: RedisEntryMetadata.DecodeError.self) { try RedisEntryMetadata(decoding: Array(bytes[..<cut])) }
        }
        var flag = bytes
        flag[33] = 7
        #expect(throws: RedisEntryMetadata.DecodeError.self) { try RedisEntryMetadata(decoding: flag) }
    }

    @Test("the demo takes --store redis://..., and reports a bad Redis URL as a usage error")
    func demoStoreOption() throws {
        #expect(try DemoCommand.parse(["--store", "redis://127.0.0.1:6380/2"]) == .walkthrough(.redis(url: "redis://127.0.0.1:6380/2")))
        #expect(try DemoCommand.parse(["--store=redis://:pw@localhost"]) == .walkthrough(.redis(url: "redis://:pw@localhost")))
        guard case .fetch(let options) = try DemoCommand.parse(["fetch", "http://a.test/", "--store", "redis://h:1"]) else {
            Issue.record("not a fetch")
            return
        }
        #expect(options.store == .redis(url: "redis://h:1"))
        for bad in ["redis://h:port", "rediss://h?cacert="] {
            do {
                _ = try DemoCommand.parse(["--store", bad])
                Issue.record("parsed \(bad)")
            } catch {
                #expect(error.description.contains("--store takes") && error.description.contains("redis://"), "\(error.description)")
            }
        }
        #expect(DemoCommand.usage.contains("redis://[user:password@]host:port[/db]"))
    }
}
