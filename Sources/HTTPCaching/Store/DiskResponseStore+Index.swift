import Foundation

// The disk store's index: what it knows of each entry without reading it (key, size,
// stored-at, status, useful-until, generation, order of use), kept in memory and in the
// shared journal `index.log`, one checksummed line per change.

/// The name of an entry's file: a 128-bit hash of the key's storage string (two independent
/// 64-bit hashes, XXH3 and XXH64), as 32 hex digits. Not cryptographic and not needed to be:
/// the file holds the full key, compared on every read.
struct EntryName: Hashable, Sendable, Comparable {
    let high: UInt64
    let low: UInt64

    init(_ key: CacheKey) {
        self.init(storageBytes: Self.storageBytes(of: key))
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The name of the key whose `CacheKey.storageString` is `bytes`.
    init(storageBytes bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { EntryName(storageBytes: $0) }
    }

    /// The name of the key whose `CacheKey.storageString` is `bytes`.
    init(storageBytes bytes: UnsafeRawBufferPointer) {
        high = XXH3.hash(bytes)
        low = XXH64.hash(bytes, seed: 0x9E37_79B9_7F4A_7C15)
    }

    /// The UTF-8 of `key.storageString`, built without string interpolation (on every read's
    /// path); the tests pin the two to each other.
    static func storageBytes(of key: CacheKey) -> [UInt8] {
        let partition = key.partition?.rawValue ?? "", variant = key.variant ?? ""
        let parts = (key.namespace, key.method, key.url, partition, variant)
        let lengths = (parts.0.utf8.count, parts.1.utf8.count, parts.2.utf8.count, parts.3.utf8.count, parts.4.utf8.count)
        let total = 3 + lengths.0 + lengths.1 + lengths.2 + lengths.3 + lengths.4 + 5
            + digits(lengths.0) + digits(lengths.1) + digits(lengths.2) + digits(lengths.3) + digits(lengths.4)
        return [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var at = 0
            for byte in "k1|".utf8 { buffer[at] = byte; at += 1 }
            write(parts.0, lengths.0, into: buffer, at: &at)
            write(parts.1, lengths.1, into: buffer, at: &at)
            write(parts.2, lengths.2, into: buffer, at: &at)
            write(parts.3, lengths.3, into: buffer, at: &at)
            write(parts.4, lengths.4, into: buffer, at: &at)
            count = at
        }
    }

    private static func digits(_ value: Int) -> Int {
        var value = value, digits = 1
        while value >= 10 { value /= 10; digits += 1 }
        return digits
    }

    /// `length:part` at `at`, which moves past it.
    private static func write(_ part: String, _ length: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at: inout Int) {
        let width = digits(length)
        var value = length
        for position in stride(from: at + width - 1, through: at, by: -1) {
            buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
        }
        at += width
        buffer[at] = UInt8(ascii: ":")
        at += 1
        let copied: Bool? = part.utf8.withContiguousStorageIfAvailable { utf8 in
            if let base = utf8.baseAddress { (buffer.baseAddress! + at).update(from: base, count: length) }
            return true
        }
        if copied == nil { for (offset, byte) in part.utf8.enumerated() { buffer[at + offset] = byte } }
        at += length
    }

    /// Calls `body` with the entry file's name as a C string (no String is made).
    func withFileName<T>(_ body: (UnsafePointer<CChar>) -> T) -> T {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 39) { buffer in
            @inline(__always) func digit(_ value: UInt64) -> UInt8 {
                let nibble = UInt8(truncatingIfNeeded: value & 15)
                return nibble < 10 ? 48 + nibble : 87 + nibble
            }
            for i in 0..<16 {
                buffer[i] = digit(high >> UInt64(60 - 4 * i))
                buffer[16 + i] = digit(low >> UInt64(60 - 4 * i))
            }
            buffer[32] = UInt8(ascii: "."); buffer[33] = UInt8(ascii: "e"); buffer[34] = UInt8(ascii: "n")
            buffer[35] = UInt8(ascii: "t"); buffer[36] = UInt8(ascii: "r"); buffer[37] = UInt8(ascii: "y")
            buffer[38] = 0
            return buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// The name in 32 lower-case hex digits; nil for anything else.
    init?(hex: UnsafeRawBufferPointer) {
        guard hex.count == 32, let high = Journal.hex64(UnsafeRawBufferPointer(rebasing: hex[0..<16])),
              let low = Journal.hex64(UnsafeRawBufferPointer(rebasing: hex[16..<32])) else { return nil }
        self.init(high: high, low: low)
    }

    /// `init(hex:)` from a file name's bytes.
    init?<Bytes: Collection>(hex: Bytes) where Bytes.Element == UInt8 {
        guard hex.count == 32, let name = Array(hex).withUnsafeBytes({ EntryName(hex: $0) }) else { return nil }
        self = name
    }

    /// 32 lower-case hex digits.
    var hex: String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(32)
        Journal.appendHex(&bytes, high)
        Journal.appendHex(&bytes, low)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The entry file's name.
    var fileName: String { hex + ".entry" }

    static func < (lhs: EntryName, rhs: EntryName) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }
}

/// What the index knows of one entry.
struct IndexEntry: Equatable, Sendable {
    var key: CacheKey
    var size: Int
    var storedAt: Date
    var statusCode: Int
    var usefulUntil: Date?
    var generation: UInt64
    /// The index's clock at the entry's last use: larger is more recent.
    var access: UInt64 = 0

    init(key: CacheKey, size: Int, storedAt: Date, statusCode: Int, usefulUntil: Date?, generation: UInt64) {
        self.key = key
        self.size = size
        self.storedAt = storedAt
        self.statusCode = statusCode
        self.usefulUntil = usefulUntil
        self.generation = generation
    }

    init(_ entry: CacheEntry) {
        self.init(key: entry.key, size: entry.byteCount, storedAt: entry.storedAt, statusCode: entry.statusCode,
                  usefulUntil: entry.usefulUntil, generation: entry.generation)
    }

    var info: StoredEntryInfo {
        StoredEntryInfo(key: key, byteCount: size, storedAt: storedAt, statusCode: statusCode, usefulUntil: usefulUntil)
    }
}

/// One change to the index: a line of `index.log`.
enum JournalRecord: Equatable, Sendable {
    /// An entry was stored (or replaced).
    case put(EntryName, IndexEntry)
    /// An entry was removed or evicted.
    case remove(EntryName)
    /// An entry was used (least-recently-used order).
    case access(EntryName)
    /// Every entry was removed.
    case clear
}

/// The entries, their total size and their order of use. Replaying the journal in order
/// gives every process the same index; records are applied whatever their origin, so a
/// process also replays its own.
struct Index: Sendable {
    private(set) var entries: [EntryName: IndexEntry] = [:]
    /// The sum of the sizes, saturating (a damaged journal cannot make it trap).
    private(set) var bytes = 0
    /// Advances with every put and use; `IndexEntry.access` takes its value.
    private(set) var clock: UInt64 = 0

    var count: Int { entries.count }

    subscript(name: EntryName) -> IndexEntry? { entries[name] }

    /// Adds or replaces an entry as the most recently used. The same entry put again (its own
    /// journal line, replayed by the process that wrote it) keeps its place: replaying lines
    /// late must not make older entries look newer than the ones written since.
    mutating func put(_ name: EntryName, _ entry: IndexEntry) {
        if let known = entries[name], known.generation == entry.generation { return }
        var entry = entry
        clock &+= 1
        entry.access = clock
        if let old = entries.updateValue(entry, forKey: name) { bytes = max(0, bytes &- old.size) }
        bytes = bytes.addingReportingOverflow(entry.size).overflow ? Int.max : bytes + entry.size
    }

    @discardableResult
    mutating func remove(_ name: EntryName) -> IndexEntry? {
        guard let old = entries.removeValue(forKey: name) else { return nil }
        bytes = entries.isEmpty ? 0 : max(0, bytes &- old.size)
        return old
    }

    /// Makes an entry the most recently used; false if it is not known.
    @discardableResult
    mutating func touch(_ name: EntryName) -> Bool {
        guard let index = entries.index(forKey: name) else { return false }
        clock &+= 1
        entries.values[index].access = clock
        return true
    }

    enum Use { case touched, unknown, otherGeneration }

    /// Makes an entry the most recently used if the index knows it as `generation`.
    mutating func touch(_ name: EntryName, ifGeneration generation: UInt64) -> Use {
        guard let index = entries.index(forKey: name) else { return .unknown }
        guard entries.values[index].generation == generation else { return .otherGeneration }
        clock &+= 1
        entries.values[index].access = clock
        return .touched
    }

    mutating func clear() {
        entries.removeAll()
        bytes = 0
    }

    mutating func apply(_ record: JournalRecord) {
        switch record {
        case .put(let name, let entry): put(name, entry)
        case .remove(let name): remove(name)
        case .access(let name): touch(name)
        case .clear: clear()
        }
    }

    /// Applies every complete line of `bytes` (a damaged line is skipped).
    /// - Returns: the bytes consumed (through the last newline: a torn last line waits for
    ///   its end), and how many lines were read and how many of them skipped.
    @discardableResult
    mutating func replay(_ bytes: UnsafeRawBufferPointer) -> (consumed: Int, lines: Int, skipped: Int) {
        var lines = 0, skipped = 0
        let consumed = Journal.forEachLine(bytes) { line in
            lines += 1
            if let record = Journal.parse(line) { apply(record) } else { skipped += 1 }
        }
        return (consumed, lines, skipped)
    }

    /// The names in least-recently-used order, with the entries.
    func leastRecentFirst() -> [(name: EntryName, entry: IndexEntry)] {
        entries.map { (name: $0.key, entry: $0.value) }.sorted { $0.entry.access < $1.entry.access }
    }
}
