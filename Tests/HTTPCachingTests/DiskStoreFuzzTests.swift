import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

@Suite("Fuzzing the entry decoder and the index replay")
struct DiskStoreFuzzTests {
    typealias E = StoreConformance

    /// Keys of every shape, made once (one of them is 12 KB).
    static let keys = EntryFileFormatTests.keys()

    /// A random entry (body, headers, keys of every shape).
    static func randomEntry(_ random: inout SeededGenerator) -> CacheEntry {
        var entry = E.entry("/fuzz/\(random.next() % 1000)", body: "",
                            windows: random.next() % 2 == 0 ? nil : .test(fresh: 1, usable: 2),
                            usefulUntil: random.next() % 2 == 0 ? nil : E.base)
        if random.next() % 3 == 0 { entry.key = keys[Int(random.next() % UInt64(keys.count))] }
        entry.body = Data((0..<Int(random.next() % 3000)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        for i in 0..<Int(random.next() % 5) { entry.headers["X-\(i)"] = String(random.next()) }
        return entry
    }

    static func mutate(_ bytes: [UInt8], _ other: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = bytes
        switch random.next() % 5 {
        case 0: // flip one to three bits
            for _ in 0...(random.next() % 3) where !bytes.isEmpty {
                bytes[Int(random.next() % UInt64(bytes.count))] ^= UInt8(1) << (random.next() % 8)
            }
        case 1: // truncate
            bytes.removeLast(Int(random.next() % UInt64(bytes.count + 1)))
        case 2: // extend
            bytes += (0..<(1 + random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 3: // splice: a prefix of one, a suffix of another
            let cut = Int(random.next() % UInt64(bytes.count + 1)), from = Int(random.next() % UInt64(other.count + 1))
            bytes = Array(bytes[..<cut]) + Array(other[from...])
        default: // overwrite a run with random bytes
            guard !bytes.isEmpty else { break }
            let start = Int(random.next() % UInt64(bytes.count))
            for i in start..<min(bytes.count, start + 1 + Int(random.next() % 16)) { bytes[i] = UInt8(truncatingIfNeeded: random.next()) }
        }
        return bytes
    }

    @Test("the entry decoder on random and mutated bytes: no crash, and anything it accepts is a valid encoding",
          arguments: FuzzCases.seeds([0x5EED_0001]))
    func decoder(seed: UInt64) {
        var pool = SeededGenerator(seed: seed)
        let entries = (0..<40).map { _ in Self.randomEntry(&pool) }
        let encodings = entries.map { Array(EntryFileFormat.encode($0)) }
        var accepted = 0
        let ran = FuzzCases(seed: seed, minimum: 1000, maximum: 3000, budget: .milliseconds(500)).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let bytes: [UInt8]
            if fuzzCase.index % 4 == 0 {
                bytes = (0..<Int(random.next() % 400)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            } else {
                let index = Int(random.next() % UInt64(encodings.count))
                bytes = Self.mutate(encodings[index], encodings[Int(random.next() % UInt64(encodings.count))], &random)
            }
            guard let decoded = try? EntryFileFormat.decode(Data(bytes)) else { return }
            accepted += 1
            // Only an intact encoding (a splice can rebuild one exactly) is accepted, whole.
            #expect(Array(EntryFileFormat.encode(decoded)) == bytes, "\(fuzzCase.label) accepted changed bytes")
            #expect(entries.contains(decoded), "\(fuzzCase.label) decoded an entry never encoded")
        }
        #expect(accepted < ran / 10, "seed \(hexSeed(seed)): \(accepted) of \(ran) mutated inputs decoded")
    }

    /// Random journal records about `entries`.
    static func randomRecords(_ random: inout SeededGenerator, of entries: [CacheEntry], count: Int) -> [JournalRecord] {
        (0..<count).map { _ in
            let entry = entries[Int(random.next() % UInt64(entries.count))]
            let name = EntryName(entry.key)
            switch random.next() % 10 {
            case 0..<5: return .put(name, IndexEntry(entry))
            case 5..<7: return .remove(name)
            case 7..<9: return .access(name)
            default: return random.next() % 4 == 0 ? .clear : .access(name)
            }
        }
    }

    static func replay(_ bytes: [UInt8]) -> Index {
        var index = Index()
        bytes.withUnsafeBytes { _ = index.replay($0) }
        return index
    }

    static func checkInvariants(_ index: Index, _ label: String) {
        #expect(index.bytes == index.entries.values.reduce(0) { $0 + $1.size }, "\(label)")
        for (name, entry) in index.entries { #expect(EntryName(entry.key) == name, "\(label)") }
    }

    @Test("the index replay on random bytes: no crash, nothing absurd trusted", arguments: FuzzCases.seeds([0x5EED_0003]))
    func replayRandom(seed: UInt64) {
        FuzzCases(seed: seed, minimum: 200, maximum: 500, budget: .milliseconds(500)).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let bytes = (0..<Int(random.next() % 2000)).map { _ -> UInt8 in
                let byte = UInt8(truncatingIfNeeded: random.next())
                return byte % 16 == 0 ? 10 : byte
            }
            let index = Self.replay(bytes)
            #expect(index.count == 0, "\(fuzzCase.label): random bytes made an entry")
            Self.checkInvariants(index, fuzzCase.label)
        }
    }

    @Test("the index replay on mutated journals: a damaged line is skipped, as if absent; a torn end waits",
          arguments: FuzzCases.seeds([0x5EED_0004]))
    func replayMutated(seed: UInt64) {
        var pool = SeededGenerator(seed: seed)
        let entries = (0..<20).map { _ in Self.randomEntry(&pool) }
        FuzzCases(seed: seed, minimum: 100, maximum: 200, budget: .seconds(1)).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let label = fuzzCase.label
            let lines = Self.randomRecords(&random, of: entries, count: 1 + Int(random.next() % 40)).map(Journal.line)
            // One byte of one line changed (never its newline): that line is skipped.
            let damaged = Int(random.next() % UInt64(lines.count))
            var mutated = lines
            let at = Int(random.next() % UInt64(lines[damaged].count - 1))
            mutated[damaged][at] ^= UInt8(1 + random.next() % 255)
            if mutated[damaged][at] == 10 { mutated[damaged][at] = 11 }
            var without = lines
            without.remove(at: damaged)
            let expected = Self.replay(without.flatMap { $0 })
            let actual = Self.replay(mutated.flatMap { $0 })
            #expect(actual.entries == expected.entries, "\(label)")
            Self.checkInvariants(actual, label)
            // Cut anywhere: the complete lines before the cut count, the torn one waits.
            let whole = lines.flatMap { $0 }
            let cut = Int(random.next() % UInt64(whole.count + 1))
            var index = Index()
            let consumed = whole[..<cut].withUnsafeBytes { index.replay($0).consumed }
            let completeLines = whole[..<consumed].filter { $0 == 10 }.count
            #expect(index.entries == Self.replay(lines.prefix(completeLines).flatMap { $0 }).entries, "\(label): cut at \(cut)")
            // Garbage glued to the front of a line spoils that line only.
            var glued = lines
            glued[damaged] = Array("P 12 x".utf8) + glued[damaged]
            #expect(Self.replay(glued.flatMap { $0 }).entries == expected.entries, "\(label): garbage glued to line \(damaged)")
        }
    }

    @Test("the storage-key parser agrees with CacheKey(storageString:) on random and mutated strings",
          arguments: FuzzCases.seeds([0x5EED_0005]))
    func storageKeyParser(seed: UInt64) {
        let valid = Self.keys.map { Array($0.storageString.utf8) }
        FuzzCases(seed: seed, minimum: 1000, maximum: 3000, budget: .milliseconds(500)).run { fuzzCase in
            var random = SeededGenerator(seed: fuzzCase.seed)
            let bytes = fuzzCase.index % 3 == 0
                ? (0..<Int(random.next() % 40)).map { _ in Array("k1|0123456789:ab".utf8)[Int(random.next() % 16)] }
                : Self.mutate(valid[Int(random.next() % UInt64(valid.count))], valid[0], &random)
            let ours = bytes.withUnsafeBytes { Journal.storageKey($0) }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                #expect(ours == nil, "\(fuzzCase.label)")
                return
            }
            let theirs = CacheKey(storageString: text)
            if let ours {
                #expect(ours == theirs && ours.storageString == text, "\(fuzzCase.label): \(text)")
            } else if let theirs {
                #expect(theirs.storageString != text, "\(fuzzCase.label): rejected a canonical storage string: \(text)")
            }
        }
    }
}
