import Foundation
import HTTPCaching

/// The checks `StoreConformance.run()` performs, one function each, in the order of
/// `StoreConformance.checkNames`.
extension StoreConformance {
    func readsBackEveryField(_ c: inout Context) throws {
        let store = try makeStore()
        c.expect(try store.entry(for: Self.entry("/a").key) == nil, "an empty store found an entry")
        var written = Self.entry("/a?page=1", body: "one", headers: ["ETag": "\"1\"", "X-Custom": "yes"],
                                 windows: CacheWindows(fresh: 1, usable: 2),
                                 usefulUntil: Self.base.addingTimeInterval(1_000_000_000))
        written.varyValues = ["accept-language": "en"]
        let result = try store.write(written)
        c.expect(result.stored, "a small entry was not stored")
        c.expect(result.evicted.isEmpty, "writing to an empty store evicted \(result.evicted)")
        let read = try store.entry(for: written.key)
        c.expect(read == written, "read back \(String(describing: read)), expected every field as written: \(written)")
        c.expect(try store.entry(for: Self.entry("/a?page=2").key) == nil, "the query is not part of the key")
        let url = URL(string: "http://example.test/empty")!
        let empty = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 204, headers: [:], body: Data(), storedAt: Self.base)
        try store.write(empty)
        c.expect(try store.entry(for: empty.key) == empty, "an entry with no headers and no body did not read back")
        let binary = CacheEntry(key: CacheKey(url: URL(string: "http://example.test/bin")!), url: URL(string: "http://example.test/bin")!,
                                statusCode: 200, headers: ["Content-Type": "application/octet-stream"],
                                body: Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }), storedAt: Self.base)
        try store.write(binary)
        c.expect(try store.entry(for: binary.key)?.body == binary.body, "a 70 KB binary body did not read back whole")
        // A partial entry: its spans read back with it, or the body would be taken for the whole.
        var partial = Self.entry("/partial", body: "abcdeklmno", headers: ["ETag": "\"p\""], statusCode: 206)
        partial.partialContent = PartialContent(completeLength: 26, spans: [0..<5, 10..<15])
        try store.write(partial)
        c.expect(try store.entry(for: partial.key) == partial, "a partial entry did not read back with its spans")
    }

    func writesInParts(_ c: inout Context) throws {
        let store = try makeStore()
        let parts = (0..<5).map { index in Data((0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }) }
        let whole = parts.reduce(into: Data()) { $0.append($1) }
        var entry = Self.entry("/parts", headers: ["ETag": "\"p\""])
        let writer = try store.makeWriter(for: entry.key)
        for part in parts { try writer.append(part) }
        c.expect(try writer.body == whole, "the writer's body is not the parts appended, in order")
        entry.body = Data()
        var variant = entry
        variant.key.variant = "v1"
        c.expect(try writer.commit([variant, entry]).stored, "a committed entry was not stored")
        entry.body = whole
        variant.body = whole
        c.expect(try store.entry(for: entry.key) == entry, "the committed entry did not read back whole")
        c.expect(try store.entry(for: variant.key) == variant, "the second entry sharing the body did not read back whole")
        writer.abort() // after a commit: nothing happens
        c.expect(try store.entry(for: entry.key) == entry, "an abort after the commit removed the entry")
        let (count, bytes) = (store.entryCount, store.totalBytes)
        let aborted = try store.makeWriter(for: Self.entry("/aborted").key)
        try aborted.append(parts[0])
        aborted.abort()
        c.expect(try store.entry(for: Self.entry("/aborted").key) == nil, "an aborted writer left an entry")
        c.expect(store.entryCount == count && store.totalBytes == bytes, "an aborted writer changed the counts")
    }

    func replacesAnEntry(_ c: inout Context) throws {
        let store = try makeStore()
        try store.write(Self.entry("/a", body: "old"))
        let new = Self.entry("/a", body: "new", storedAt: Self.base.addingTimeInterval(5))
        try store.write(new)
        let read = try store.entry(for: new.key)
        c.expect(read == new, "after a replacement read \(String(describing: read)), expected the new entry")
        c.expect(store.entryCount == 1, "a replaced entry counts twice: entryCount \(store.entryCount)")
        c.expect(store.totalBytes == new.byteCount, "totalBytes \(store.totalBytes) after a replacement, expected \(new.byteCount)")
    }

    func keysDifferInEveryPart(_ c: inout Context) throws {
        let store = try makeStore()
        let base = Self.entry("/k")
        var keys: [CacheKey] = [base.key]
        var key = base.key
        key.method = "HEAD"; keys.append(key)
        key = base.key; key.partition = CredentialPartition(rawValue: "00112233445566778899aabbccddeeff"); keys.append(key)
        key = base.key; key.partition = CredentialPartition(rawValue: "ffeeddccbbaa99887766554433221100"); keys.append(key)
        key = base.key; key.variant = "v1"; keys.append(key)
        key = base.key; key.namespace = "ns2"; keys.append(key)
        key = base.key; key.url += "x"; keys.append(key)
        for (index, key) in keys.enumerated() {
            var entry = base
            entry.key = key
            entry.body = Data("body \(index)".utf8)
            try store.write(entry)
        }
        for (index, key) in keys.enumerated() {
            let body = try store.entry(for: key).map { String(decoding: $0.body, as: UTF8.self) }
            c.expect(body == "body \(index)", "key \(key.storageString) read \(String(describing: body)), expected body \(index)")
        }
        c.expect(store.entryCount == keys.count, "entryCount \(store.entryCount), expected \(keys.count) distinct keys")
    }

    func removesOne(_ c: inout Context) throws {
        let store = try makeStore()
        try store.write(Self.entry("/a"))
        try store.write(Self.entry("/b"))
        try store.removeEntry(for: Self.entry("/a").key)
        try store.removeEntry(for: Self.entry("/missing").key)
        c.expect(try store.entry(for: Self.entry("/a").key) == nil, "a removed entry was found")
        c.expect(try store.entry(for: Self.entry("/b").key) != nil, "removing one entry removed another")
        c.expect(store.entryCount == 1, "entryCount \(store.entryCount) after removing one of two")
    }

    func removesAll(_ c: inout Context) throws {
        let store = try makeStore()
        for i in 0..<20 { try store.write(Self.entry("/\(i)")) }
        var reports: [RemovalProgress] = []
        try store.removeAll { reports.append($0) }
        c.expect(store.entryCount == 0, "entryCount \(store.entryCount) after removeAll")
        c.expect(store.totalBytes == 0, "totalBytes \(store.totalBytes) after removeAll")
        c.expect(try store.entry(for: Self.entry("/3").key) == nil, "an entry survived removeAll")
        c.expect(reports.last.map { $0.removed == $0.total && $0.total == 20 } ?? false,
                 "the last progress report of removing 20 entries was \(String(describing: reports.last))")
        c.expect(zip(reports, reports.dropFirst()).allSatisfy { $0.removed <= $1.removed },
                 "progress went backwards: \(reports)")
    }

    func removesByMetadata(_ c: inout Context) throws {
        let store = try makeStore()
        for i in 0..<10 {
            try store.write(Self.entry("/\(i)", storedAt: Self.base.addingTimeInterval(TimeInterval(i)),
                                       usefulUntil: i < 3 ? Self.base.addingTimeInterval(100) : nil))
        }
        var reports: [RemovalProgress] = []
        let since = Self.base.addingTimeInterval(8)
        try store.removeEntries(where: { $0.storedAt >= since }, progress: { reports.append($0) })
        c.expect(store.entryCount == 8, "removing entries stored since a date left \(store.entryCount) of 10, expected 8")
        c.expect(try store.entry(for: Self.entry("/8").key) == nil, "an entry stored exactly at the date survived")
        c.expect(try store.entry(for: Self.entry("/7").key) != nil, "an entry stored before the date was removed")
        c.expect(reports.last.map { $0.removed == 2 && $0.total == 2 } ?? false,
                 "the last progress report was \(String(describing: reports.last)), expected 2 of 2")
        let before = Self.base.addingTimeInterval(1)
        try store.removeEntries(where: { $0.storedAt < before }, progress: { _ in })
        c.expect(try store.entry(for: Self.entry("/0").key) == nil, "removing entries stored before a date kept an older one")
        let later = Self.base.addingTimeInterval(200)
        try store.removeEntries(where: { $0.usefulUntil.map { $0 <= later } ?? false }, progress: { _ in })
        c.expect(try store.entry(for: Self.entry("/1").key) == nil, "an entry past usefulUntil survived its removal by metadata")
        c.expect(try store.entry(for: Self.entry("/5").key) != nil, "an entry with no usefulUntil was removed as unusable")
        c.expect(store.entryCount == 5, "entryCount \(store.entryCount) after the three removals, expected 5")
    }

    func listsMetadata(_ c: inout Context) throws {
        let store = try makeStore()
        let a = Self.entry("/a", body: String(repeating: "a", count: 500), usefulUntil: Self.base.addingTimeInterval(60), statusCode: 404)
        let b = Self.entry("/b", storedAt: Self.base.addingTimeInterval(7))
        try store.write(a)
        try store.write(b)
        let infos = try store.entryInfos().sorted { $0.key < $1.key }
        c.expect(infos == [StoredEntryInfo(a), StoredEntryInfo(b)], "entryInfos() listed \(infos), expected the metadata of the two entries")
    }

    func countsBytesAndEntries(_ c: inout Context) throws {
        let store = try makeStore()
        let a = Self.entry("/a", body: String(repeating: "a", count: 100))
        let b = Self.entry("/b", body: String(repeating: "b", count: 300))
        try store.write(a)
        try store.write(b)
        c.expect(store.entryCount == 2, "entryCount \(store.entryCount), expected 2")
        c.expect(store.totalBytes == a.byteCount + b.byteCount, "totalBytes \(store.totalBytes), expected \(a.byteCount + b.byteCount)")
        try store.removeEntry(for: a.key)
        c.expect(store.totalBytes == b.byteCount, "totalBytes \(store.totalBytes) after a removal, expected \(b.byteCount)")
    }

    func refusesOversizedEntries(_ c: inout Context) throws {
        let store = try makeStore()
        let limit = store.maxEntrySize
        guard limit < 64 << 20 else {
            return c.skip("maxEntrySize is \(limit) bytes: no entry over it is small enough to write (the check needs a limit under 64 MiB)")
        }
        try store.write(Self.entry("/big", body: "small"))
        let big = Self.entry("/big", body: String(repeating: "z", count: limit + 1))
        let result = try store.write(big)
        c.expect(!result.stored, "an entry of \(big.byteCount) bytes over maxEntrySize \(limit) was stored")
        c.expect(try store.entry(for: big.key) == nil, "a refused write left the older entry in place")
    }

    func answersImmediately(_ c: inout Context) throws {
        let store = try makeStore()
        let a = Self.entry("/a")
        try store.write(a)
        switch store.immediateEntry(for: a.key) {
        case .found(let found): c.expect(found == a, "immediateEntry found \(found), expected \(a)")
        case .absent: c.fail("immediateEntry said absent for a stored entry")
        case .needsIO: break
        }
        if case .found = store.immediateEntry(for: Self.entry("/none").key) {
            c.fail("immediateEntry found an entry never stored")
        }
    }

    func keepsOneSecret(_ c: inout Context) throws {
        let store = try makeStore()
        let first = try store.partitionSecret(), second = try store.partitionSecret()
        c.expect(first.count >= 16, "the partition secret has \(first.count) bytes, expected at least 16")
        c.expect(first == second, "the partition secret changed between two calls")
    }

    func isSafeFromManyThreads(_ c: inout Context) throws {
        let store = try makeStore()
        let threads = self.threads
        let wrong = WrongReads()
        DispatchQueue.concurrentPerform(iterations: threads) { worker in
            for i in 0..<200 {
                let item = Self.entry("/w\(worker)/\(i % 20)", body: "\(worker)-\(i)")
                _ = try? store.write(item)
                if let read = try? store.entry(for: item.key), read.key != item.key { wrong.add() }
                if i % 7 == 0 { try? store.removeEntry(for: item.key) }
            }
        }
        c.expect(wrong.count == 0, "\(wrong.count) reads returned an entry of another key")
        for worker in 0..<threads {
            for i in 180..<200 where i % 7 != 0 {
                let read = try store.entry(for: Self.entry("/w\(worker)/\(i % 20)").key)
                let body = read.map { String(decoding: $0.body, as: UTF8.self) }
                c.expect(body == "\(worker)-\(i)", "after concurrent writes read \(String(describing: body)), expected the last write \(worker)-\(i)")
            }
        }
    }

    func evicts(_ c: inout Context) throws {
        guard let makeStoreWithCountLimit else { return c.skip("no makeStoreWithCountLimit was given") }
        let store = try makeStoreWithCountLimit(10)
        var evicted: [CacheKey] = []
        for i in 0..<30 {
            evicted += try store.write(Self.entry("/\(i)", storedAt: Self.base.addingTimeInterval(TimeInterval(i)))).evicted
            _ = try store.entry(for: Self.entry("/0").key) // keep /0 in use
        }
        c.expect(store.entryCount <= 10, "entryCount \(store.entryCount) with a count limit of 10")
        c.expect(try store.entry(for: Self.entry("/29").key) != nil, "the newest entry was evicted")
        c.expect(try store.entry(for: Self.entry("/0").key) != nil, "the most recently used entry was evicted")
        c.expect(try store.entry(for: Self.entry("/1").key) == nil, "the least recently used entry survived")
        c.expect(!evicted.isEmpty, "writing 30 entries into a store of 10 reported no eviction")
    }

    func treatsDamageAsMiss(_ c: inout Context) throws {
        guard let corrupt else { return c.skip("no corrupt closure was given") }
        let store = try makeStore()
        let a = Self.entry("/damaged", body: String(repeating: "d", count: 2000))
        try store.write(a)
        try store.write(Self.entry("/intact"))
        try corrupt(store, a.key)
        do {
            let read = try store.entry(for: a.key)
            c.expect(read == nil || read == a, "a damaged entry was served changed: \(String(describing: read))")
        } catch let error as HTTPCachingError where error.code == .corruptEntry {
            // The expected report.
        }
        c.expect(try store.entry(for: a.key) == nil, "a damaged entry was not removed after it was found")
        c.expect(try store.entry(for: Self.entry("/intact").key) != nil, "damage to one entry lost another")
    }

    func claimsExclusively(_ c: inout Context) throws {
        let store = try makeStore()
        let key = Self.entry("/claimed").key
        c.expect(store.claimRefresh(of: key, lease: 30), "a first claim was refused")
        guard claimsAreExclusive else {
            store.releaseRefresh(of: key)
            return c.skip("claimsAreExclusive is false: only that a first claim is granted was checked")
        }
        c.expect(!store.claimRefresh(of: key, lease: 30), "a second claim was granted while the first held")
        store.releaseRefresh(of: key)
        c.expect(store.claimRefresh(of: key, lease: 30), "a claim was refused after the first was released")
        store.releaseRefresh(of: key)
    }
}

/// Counts reads that returned another key's entry, from many threads.
final class WrongReads: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}
