import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// Damaged metadata behind a body whose checksum still holds. The body checksum covers only
/// the body: the metadata checksum must catch damage to the metadata, and where damage comes
/// with a matching metadata checksum (written that way), the parser's own checks must reject
/// it or read exactly what the bytes say. Either way a reader is never served a changed entry.
extension DiskStoreFuzzTests {
    /// An entry whose metadata holds every field: windows, useful-until, headers, vary values.
    static let metadataEntry: CacheEntry = {
        var entry = E.entry("/m", body: "body", headers: ["Content-Type": "text/plain", "ETag": "\"m\""],
                            windows: .test(fresh: 1, usable: 2), usefulUntil: E.base.addingTimeInterval(60))
        entry.varyValues = ["accept-language": "en"]
        return entry
    }()

    /// An encoding whose metadata is damaged, its body and body checksum intact, the metadata
    /// length in its trailer updated: `stale` keeps the checksum of the undamaged metadata;
    /// `resealed` carries one computed over the damage.
    struct DamagedMetadata {
        let stale: [UInt8]
        let resealed: [UInt8]
    }

    /// `encoded` (of an entry with a body of `bodyLength` bytes) with its metadata mutated;
    /// nil when the mutation left it as it was.
    static func damageMetadata(of encoded: [UInt8], bodyLength: Int, _ random: inout SeededGenerator) -> DamagedMetadata? {
        let trailerStart = encoded.count - EntryFileFormat.trailerSize
        let original = Array(encoded[bodyLength..<trailerStart])
        let metadata = Self.mutate(original, original, &random)
        guard metadata != original else { return nil }
        let body = Array(encoded[..<bodyLength])
        var trailer = Array(encoded[trailerStart...])
        withUnsafeBytes(of: UInt32(metadata.count).littleEndian) { trailer.replaceSubrange(8..<12, with: $0) }
        let stale = body + metadata + trailer
        return DamagedMetadata(stale: stale, resealed: resealed(stale, bodyLength: bodyLength))
    }

    /// `encoded` (of a body of `bodyLength` bytes, its trailer's metadata length right) with
    /// its metadata checksum computed again over the metadata it holds.
    static func resealed(_ encoded: [UInt8], bodyLength: Int) -> [UInt8] {
        let trailerStart = encoded.count - EntryFileFormat.trailerSize
        let check = Array(encoded[bodyLength..<(trailerStart + 24)]).withUnsafeBytes { XXH3.hash($0) }
        var out = encoded
        withUnsafeBytes(of: check.littleEndian) { out.replaceSubrange((trailerStart + 24)..<(trailerStart + 32), with: $0) }
        return out
    }

    @Test("damaged metadata behind a valid body checksum: under its old metadata checksum always a checksum mismatch; resealed, rejected as malformed or read exactly as its bytes encode it",
          arguments: FuzzCases.seeds([0x5EED_0002]))
    func metadataBehindValidChecksums(seed: UInt64) {
        let encoded = Array(EntryFileFormat.encode(Self.metadataEntry))
        var outcomes = (malformed: 0, read: 0)
        let ran = FuzzCases(seed: seed, minimum: 1000, maximum: 3000, budget: .milliseconds(500)).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            guard let damaged = Self.damageMetadata(of: encoded, bodyLength: Self.metadataEntry.body.count, &random) else { return }
            #expect(throws: EntryFileFormat.DecodeError.checksumMismatch, "\(fuzzCase.label): damage under the old checksum") {
                try EntryFileFormat.decode(Data(damaged.stale))
            }
            do throws(EntryFileFormat.DecodeError) {
                let decoded = try EntryFileFormat.decode(Data(damaged.resealed))
                outcomes.read += 1
                #expect(Array(EntryFileFormat.encode(decoded)) == damaged.resealed,
                        "\(fuzzCase.label): resealed metadata read as other than what its bytes encode")
            } catch .malformed {
                outcomes.malformed += 1
            } catch {
                Issue.record("\(fuzzCase.label): resealed metadata rejected as \(error), not as malformed")
            }
        }
        // Both ways are taken: most damage breaks the format, some only changes a value.
        #expect(outcomes.malformed > ran / 2 && outcomes.read > ran / 100, "seed \(hexSeed(seed)), \(ran) cases: \(outcomes)")
    }

    /// What the disk store must make of an entry file: report it corrupt and remove it, take
    /// it for another key's entry (a miss; its file stays), or read exactly the entry it holds.
    enum StoreReading {
        case corrupt, otherKey, read(CacheEntry)

        init(_ bytes: [UInt8], key: CacheKey) {
            do throws(EntryFileFormat.DecodeError) {
                self = .read(try EntryFileFormat.decode(Data(bytes), expecting: key))
            } catch .keyMismatch {
                self = .otherKey
            } catch {
                self = .corrupt
            }
        }
    }

    @Test("damaged metadata behind a valid body checksum in the disk store: reported corrupt, its file removed, never served, even with its decoded metadata kept from an earlier read",
          arguments: FuzzCases.seeds([0x5EED_0006]))
    func damagedMetadataInTheStore(seed: UInt64) throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        defer { store.close() }
        let entry = Self.metadataEntry
        let file = directory.path + "/" + DiskResponseStore.fileName(for: entry.key) + ".entry"
        try store.write(entry)
        let encoded = Array(try Data(contentsOf: URL(fileURLWithPath: file)))
        var corrupt = 0, damaged = 0
        try FuzzCases(seed: seed, minimum: 40).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            guard let damage = Self.damageMetadata(of: encoded, bodyLength: entry.body.count, &random) else { return }
            damaged += 1
            for (bytes, form) in [(damage.stale, "under the old checksum"), (damage.resealed, "resealed")] {
                let label = "\(fuzzCase.label), \(form)"
                let expected = StoreReading(bytes, key: entry.key)
                if case .corrupt = expected { corrupt += 1 } else if bytes == damage.stale { Issue.record("\(label): not damage") }
                try store.write(entry)
                #expect(try store.entry(for: entry.key) == entry, "\(label): read whole before the damage")
                try overwrite(file, with: Data(bytes))
                try Self.expectReading(store, expected, key: entry.key, file: file, label)
            }
        }
        #expect(damaged >= 30 && corrupt > damaged, "seed \(hexSeed(seed)): \(corrupt) corrupt in \(damaged) damaged cases")
    }

    static func expectReading(_ store: DiskResponseStore, _ expected: StoreReading, key: CacheKey, file: String,
                              _ label: String) throws {
        switch expected {
        case .corrupt:
            do {
                let served = try store.entry(for: key)
                Issue.record("\(label): \(served == nil ? "a quiet miss" : "served") instead of reported as corrupt")
            } catch let error as HTTPCachingError where error.code == .corruptEntry {
                // The expected report.
            }
            #expect(!FileManager.default.fileExists(atPath: file), "\(label): the damaged file is removed")
            #expect(try store.entry(for: key) == nil && store.entryCount == 0, "\(label): then a miss")
        case .otherKey:
            #expect(try store.entry(for: key) == nil, "\(label): another key's entry is a miss")
        case .read(let decoded):
            #expect(try store.entry(for: key) == decoded, "\(label): read exactly as its bytes encode it")
        }
    }
}
