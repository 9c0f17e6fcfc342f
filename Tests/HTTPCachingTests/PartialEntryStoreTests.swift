import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// Partial entries in the stores: the entry format's flag 8, and each store keeping the spans.
@Suite("Partial entries in the stores")
struct PartialEntryStoreTests {
    typealias E = StoreConformance

    static func partial(_ path: String = "/media", spans: [Range<Int>] = [0..<5, 10..<15], length: Int = 26) -> CacheEntry {
        let alphabet = Data("abcdefghijklmnopqrstuvwxyz".utf8)
        var entry = E.entry(path, headers: ["ETag": "\"p\"", "Content-Type": "text/plain"], statusCode: 206)
        entry.body = spans.reduce(into: Data()) { $0.append(alphabet[$1]) }
        entry.partialContent = PartialContent(completeLength: length, spans: spans)
        return entry
    }

    /// Version 4 as its documentation lays it out, written independently of `EntryFileFormat`:
    /// body, metadata, trailer. `extra` goes where flag 8's fields go; `flags` as given.
    static func referenceEncoding(_ entry: CacheEntry, flags: UInt8, extra: [UInt8] = []) -> Data {
        func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        func string(_ text: String) -> [UInt8] { le(UInt32(text.utf8.count)) + Array(text.utf8) }
        func fields(_ fields: [String: String]) -> [UInt8] {
            le(UInt32(fields.count)) + fields.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                .flatMap { string($0.key) + string($0.value) }
        }
        var metadata: [UInt8] = [flags] + le(Int64(entry.statusCode)) + le(entry.storedAt.timeIntervalSinceReferenceDate.bitPattern)
        metadata += le(entry.generation) + extra + string(entry.key.storageString) + string(entry.url.absoluteString)
        metadata += fields(entry.headers) + fields(entry.varyValues)
        var trailer = le(UInt64(entry.body.count)) + le(UInt32(metadata.count)) + le(UInt32(0))
        trailer += le(entry.body.withUnsafeBytes { BodyChecksum.checksum($0) })
        trailer += le((metadata + trailer).withUnsafeBytes { XXH3.hash($0) })
        trailer += Array("HTCE".utf8) + [4, 0, 0, 0]
        return entry.body + Data(metadata) + Data(trailer)
    }

    static func spanBytes(length: Int, spans: [Range<Int>]) -> [UInt8] {
        func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        return le(UInt64(length)) + le(UInt32(spans.count)) + spans.flatMap { le(UInt64($0.lowerBound)) + le(UInt64($0.upperBound)) }
    }

    @Test("a whole entry's encoding is version 4 as it was (no flag 8), and such bytes written independently still decode")
    func versionFourUnchanged() throws {
        let whole = E.entry("/old", headers: ["ETag": "\"o\"", "Content-Type": "text/plain"])
        let reference = Self.referenceEncoding(whole, flags: 0)
        #expect(EntryFileFormat.encode(whole) == reference)
        #expect(try EntryFileFormat.decode(reference, expecting: whole.key) == whole)
    }

    @Test("flag 8: a partial entry's complete length and spans after the transform name; they round-trip")
    func partialRoundTrip() throws {
        let entry = Self.partial()
        let parts = try #require(entry.partialContent)
        let reference = Self.referenceEncoding(entry, flags: 8, extra: Self.spanBytes(length: 26, spans: parts.spans))
        #expect(EntryFileFormat.encode(entry) == reference)
        let decoded = try EntryFileFormat.decode(reference, expecting: entry.key)
        #expect(decoded == entry && decoded.partialContent == parts && decoded.isConsistentPartial)
        let transformed = try EntryFileFormat.decodeWithTransform(EntryFileFormat.encode(entry, transform: "t"))
        #expect(transformed.entry.partialContent == parts && transformed.transform == "t")
    }

    @Test("flag 8 with spans that are not a partial content, or that do not add up to the body, is malformed: a miss, never a wrong byte",
          arguments: [
            ("overlapping", 26, [0..<5, 3..<8]), ("out of order", 26, [10..<15, 0..<5]), ("past the length", 26, [20..<27]),
            ("all of it", 10, [0..<10]), ("empty span", 26, [4..<4]), ("no span", 26, []), ("more bytes than the body", 26, [0..<11]),
          ] as [(String, Int, [Range<Int>])])
    func malformedSpans(name: String, length: Int, spans: [Range<Int>]) {
        let entry = Self.partial(spans: [0..<5, 10..<15]) // a body of 10 bytes
        let bytes = Self.referenceEncoding(entry, flags: 8, extra: Self.spanBytes(length: length, spans: spans))
        #expect(throws: EntryFileFormat.DecodeError.self, "\(name)") { try EntryFileFormat.decode(bytes) }
        // An impossible span count fails before any allocation.
        var huge = Self.spanBytes(length: 26, spans: [])
        huge.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0x7F])
        #expect(throws: EntryFileFormat.DecodeError.self) {
            try EntryFileFormat.decode(Self.referenceEncoding(entry, flags: 8, extra: huge))
        }
        // A flag this version does not know is damage.
        #expect(throws: EntryFileFormat.DecodeError.malformed("unknown flags")) {
            try EntryFileFormat.decode(Self.referenceEncoding(E.entry("/x"), flags: 16))
        }
    }

    @Test("the memory, disk and tiered stores keep a partial entry's spans, the disk store across reopening")
    func stores() throws {
        let directory = TemporaryDirectory()
        let entry = Self.partial()
        let memory: any ResponseStore = MemoryResponseStore()
        try memory.write(entry)
        #expect(try memory.entry(for: entry.key) == entry)
        do {
            let disk = try DiskResponseStore(directory: directory.url)
            defer { disk.close() }
            #expect(try disk.write(entry).stored)
            #expect(try disk.entry(for: entry.key) == entry)
        }
        let reopened = try DiskResponseStore(directory: directory.url)
        defer { reopened.close() }
        #expect(try reopened.entry(for: entry.key) == entry)
        #expect(reopened.entryInfos().first?.statusCode == 206)
        let tiered = TieredResponseStore(memory: MemoryResponseStore(), back: reopened)
        let other = Self.partial("/other")
        try tiered.write(other)
        #expect(try tiered.entry(for: other.key) == other)
    }

    @Test("the Redis store keeps a partial entry's spans: the entry is stored in the same format", .redisServer)
    func redis() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try server.makeStore()
        let entry = Self.partial()
        #expect(try store.write(entry).stored)
        #expect(try store.entry(for: entry.key) == entry)
        #expect(try server.makeStore(prefix: store.configuration.keyPrefix).entry(for: entry.key) == entry, "another host")
    }
}
