import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
import LoopbackOrigin

/// A keyed XOR, standing for an application's own encryption (say AES-GCM from its crypto
/// library): its name carries the key's identifier, so a store read with another key misses.
struct XORTransform: StoreTransform {
    let keyID: String
    let byte: UInt8
    var name: String { "xor-\(keyID)" }
    func encode(_ body: Data) throws -> Data { Data([0x5A] + body.map { $0 ^ byte }) }
    func decode(_ stored: Data) throws -> Data {
        guard stored.first == 0x5A else { throw HTTPCachingError.unavailable(reason: "not mine") }
        return Data(stored.dropFirst().map { $0 ^ byte })
    }
}

/// A transform whose decoding always fails.
struct BrokenTransform: StoreTransform {
    var name: String { "broken" }
    func encode(_ body: Data) throws -> Data { body }
    func decode(_ stored: Data) throws -> Data { throw HTTPCachingError.unavailable(reason: "cannot decode") }
}

@Suite("Transforms at rest: compression and encryption at the store boundary")
struct StoreTransformTests {
    typealias E = StoreConformance
    static var compressible: Data { Data(String(repeating: "the same words again and again, ", count: 2_000).utf8) }

    @Test("zlib, loaded from the system's libz.so.1, round-trips and compresses; damaged bytes throw, never a wrong body")
    func deflate() throws {
        #expect(DeflateTransform.isAvailable)
        let transform = DeflateTransform()
        var generator = SeededGenerator(seed: 7)
        let random = Data((0..<50_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        for body in [Self.compressible, random, Data()] { #expect(try transform.decode(transform.encode(body)) == body) }
        #expect(try transform.encode(Self.compressible).count < Self.compressible.count / 10)
        var damaged = try transform.encode(Self.compressible)
        damaged[damaged.count / 2] ^= 0xFF
        #expect(throws: HTTPCachingError.self) { try transform.decode(damaged) }
        #expect(throws: HTTPCachingError.self) { try transform.decode(Data([1, 2, 3])) }
    }

    @Test("the disk store keeps bodies compressed; read with another transform, or none, an entry is a miss and stays")
    func diskStore() throws {
        let directory = TemporaryDirectory()
        var entry = E.entry("/t")
        entry.body = Self.compressible
        let compressed = try DiskResponseStore(directory: directory.url, transform: DeflateTransform())
        #expect(try compressed.write(entry).stored)
        #expect(try compressed.entry(for: entry.key) == entry)
        #expect(compressed.totalBytes < Self.compressible.count / 5, "the store counts what it keeps")
        compressed.close()
        for other in [nil, XORTransform(keyID: "1", byte: 7)] as [(any StoreTransform)?] {
            let reader = try DiskResponseStore(directory: directory.url, transform: other)
            #expect(try reader.entry(for: entry.key) == nil, "\(other?.name ?? "no transform")")
            reader.close()
        }
        let again = try DiskResponseStore(directory: directory.url, transform: DeflateTransform(level: 9))
        #expect(try again.entry(for: entry.key) == entry, "the entry stayed for its own transform")
    }

    @Test("a transform that cannot decode is a store failure: the request goes to the origin, the body is never wrong")
    func failingTransform() async throws {
        let directory = TemporaryDirectory()
        let h = try Harness(store: try DiskResponseStore(directory: directory.url, transform: BrokenTransform()))
        h.origin.route("/b") { _, hit in .init(text: "answer \(hit)") }
        _ = try await h.get("/b")
        let second = try await h.get("/b")
        #expect(second.text == "answer 2" && second.status == .miss)
        #expect(h.recorder.count { $0.name == "storeFailed" && $0.reason?.contains("cannot decode") == true } == 1)
    }

    @Test("end to end through an encrypting disk store: the bytes on disk are not the body; hits read it back")
    func encryptingEndToEnd() async throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url, transform: XORTransform(keyID: "k", byte: 0x2F))
        let h = try Harness(store: store)
        h.origin.route("/secret", response: .init(text: "a secret body"))
        _ = try await h.get("/secret")
        #expect(try await h.get("/secret").text == "a secret body")
        let files = try FileManager.default.contentsOfDirectory(atPath: store.files.path).filter { $0.hasSuffix(".entry") }
        let bytes = try files.map { try Data(contentsOf: URL(fileURLWithPath: store.files.path + "/" + $0)) }
        #expect(!bytes.isEmpty && bytes.allSatisfy { $0.range(of: Data("a secret body".utf8)) == nil })
    }
}

@Suite("Transforms at rest in Redis", .redisServer)
struct RedisStoreTransformTests {
    @Test("Redis keeps bodies compressed; another transform's entry is a miss")
    func redisStore() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let configuration = server.configuration()
        let store = try RedisResponseStore(configuration: configuration, transform: DeflateTransform())
        var entry = StoreConformance.entry("/r")
        entry.body = StoreTransformTests.compressible
        #expect(try store.write(entry).stored)
        #expect(try store.entry(for: entry.key) == entry)
        let stored = try server.command("HGET", store.layout.entryKey(entry.key), "d")
        if case .bulkString(let bytes?) = stored { #expect(bytes.count < StoreTransformTests.compressible.count / 5) }
        let plain = try RedisResponseStore(configuration: configuration)
        #expect(try plain.entry(for: entry.key) == nil)
        let other = try RedisResponseStore(configuration: configuration, transform: XORTransform(keyID: "2", byte: 1))
        #expect(try other.entry(for: entry.key) == nil)
    }
}
