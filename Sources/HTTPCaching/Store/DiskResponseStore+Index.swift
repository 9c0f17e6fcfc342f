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

/// The text form of `JournalRecord`s. Each line is its fields separated by spaces, then a
/// space and the XXH3 of everything before it (16 hex digits):
///
///     P <name> <size> <storedAt> <status> <usefulUntil|-> <generation> <key> <check>
///     R <name> <check>
///     A <name> <check>
///     C <check>
///
/// Names are 32 hex digits; sizes and statuses decimal; dates (seconds since 2001, as a
/// Double's bit pattern), generations and checks 16 hex digits; the key is its storage
/// string with `%`, spaces and control bytes escaped as `%XX`. Every number is parsed as a
/// bounded non-negative integer: an out-of-range, damaged or unknown line is skipped.
enum Journal {
    /// The largest entry size a line may give (1 TiB): anything larger is damage.
    static let maxSize = 1 << 40
    /// The largest status code a line may give.
    static let maxStatus = 999_999

    static func line(_ record: JournalRecord) -> [UInt8] {
        var out = [UInt8]()
        switch record {
        case .put(let name, let entry):
            out.reserveCapacity(160 + entry.key.url.utf8.count)
            out.append(UInt8(ascii: "P"))
            field(&out) { appendHex(&$0, name.high); appendHex(&$0, name.low) }
            field(&out) { $0 += String(entry.size).utf8 }
            field(&out) { appendHex(&$0, entry.storedAt.timeIntervalSinceReferenceDate.bitPattern) }
            field(&out) { $0 += String(entry.statusCode).utf8 }
            field(&out) { out in
                if let usefulUntil = entry.usefulUntil {
                    appendHex(&out, usefulUntil.timeIntervalSinceReferenceDate.bitPattern)
                } else {
                    out.append(UInt8(ascii: "-"))
                }
            }
            field(&out) { appendHex(&$0, entry.generation) }
            field(&out) { escape(&$0, entry.key.storageString) }
        case .remove(let name):
            out.append(UInt8(ascii: "R"))
            field(&out) { appendHex(&$0, name.high); appendHex(&$0, name.low) }
        case .access(let name):
            out.append(UInt8(ascii: "A"))
            field(&out) { appendHex(&$0, name.high); appendHex(&$0, name.low) }
        case .clear:
            out.append(UInt8(ascii: "C"))
        }
        let check = out.withUnsafeBytes { XXH3.hash($0) }
        field(&out) { appendHex(&$0, check) }
        out.append(UInt8(ascii: "\n"))
        return out
    }

    /// The record of one line (without its newline); nil for a damaged or unknown line.
    static func parse(_ line: UnsafeRawBufferPointer) -> JournalRecord? {
        guard line.count >= 18, line[line.count - 17] == UInt8(ascii: " "),
              let check = hex64(rebasing(line, line.count - 16, line.count)) else { return nil }
        let body = rebasing(line, 0, line.count - 17)
        guard XXH3.hash(body) == check, body.count == 1 || body[1] == UInt8(ascii: " ") else { return nil }
        var fields = Fields(bytes: body, position: 2)
        switch body[0] {
        case UInt8(ascii: "P"):
            guard let name = fields.next().flatMap(EntryName.init(hex:)),
                  let size = fields.next().flatMap({ decimal($0, max: maxSize) }),
                  let storedAt = fields.next().flatMap(date),
                  let status = fields.next().flatMap({ decimal($0, max: maxStatus) }),
                  let useful = fields.next(),
                  let generation = fields.next().flatMap(hex64),
                  let escapedKey = fields.next(), fields.isAtEnd else { return nil }
            var usefulUntil: Date?
            if !(useful.count == 1 && useful[0] == UInt8(ascii: "-")) {
                guard let date = date(useful) else { return nil }
                usefulUntil = date
            }
            let parsed: (key: CacheKey, name: EntryName)? = withUnescaped(escapedKey) { bytes in
                guard let key = storageKey(bytes) else { return nil }
                return (key, EntryName(storageBytes: bytes))
            }
            guard let parsed, parsed.name == name else { return nil }
            return .put(name, IndexEntry(key: parsed.key, size: size, storedAt: storedAt, statusCode: status,
                                         usefulUntil: usefulUntil, generation: generation))
        case UInt8(ascii: "R"):
            guard let name = fields.next().flatMap(EntryName.init(hex:)), fields.isAtEnd else { return nil }
            return .remove(name)
        case UInt8(ascii: "A"):
            guard let name = fields.next().flatMap(EntryName.init(hex:)), fields.isAtEnd else { return nil }
            return .access(name)
        case UInt8(ascii: "C"):
            return body.count == 1 ? .clear : nil
        default:
            return nil
        }
    }

    /// The fields of a line after its kind, separated by single spaces.
    private struct Fields {
        let bytes: UnsafeRawBufferPointer
        var position: Int

        var isAtEnd: Bool { position > bytes.count }

        mutating func next() -> UnsafeRawBufferPointer? {
            guard position <= bytes.count else { return nil }
            var end = position
            while end < bytes.count, bytes[end] != UInt8(ascii: " ") { end += 1 }
            defer { position = end + 1 }
            return rebasing(bytes, position, end)
        }
    }

    private static func rebasing(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// The key of a storage string (`CacheKey.storageString`), parsed from bytes; nil unless
    /// the bytes are exactly the storage string of the key returned (canonical lengths, a
    /// method), so the name hashed from them is the key's. The tests pin this to
    /// `CacheKey.init(storageString:)`.
    static func storageKey(_ bytes: UnsafeRawBufferPointer) -> CacheKey? {
        guard bytes.count >= 3, bytes[0] == UInt8(ascii: "k"), bytes[1] == UInt8(ascii: "1"), bytes[2] == UInt8(ascii: "|") else {
            return nil
        }
        var position = 3
        var parts: [String] = []
        parts.reserveCapacity(5)
        for _ in 0..<5 {
            var length = 0, digits = 0
            while position < bytes.count, bytes[position] != UInt8(ascii: ":") {
                let byte = bytes[position]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 12,
                      !(digits == 1 && length == 0) else { return nil } // no leading zeros
                length = length * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
                position += 1
            }
            guard digits > 0, position < bytes.count, length <= bytes.count - position - 1 else { return nil }
            let part = rebasing(bytes, position + 1, position + 1 + length)
            guard let text = part.allSatisfy({ $0 < 0x80 }) ? String(decoding: part, as: UTF8.self)
                    : String(validating: part, as: UTF8.self) else { return nil }
            parts.append(text)
            position += 1 + length
        }
        guard position == bytes.count, !parts[1].isEmpty else { return nil }
        return CacheKey(method: parts[1], normalizedURL: parts[2],
                        partition: parts[3].isEmpty ? nil : CredentialPartition(rawValue: parts[3]),
                        variant: parts[4].isEmpty ? nil : parts[4], namespace: parts[0])
    }

    /// Calls `body` with each complete line (without its newline).
    /// - Returns: the bytes through the last newline.
    static func forEachLine(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Int {
        var start = 0
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                body(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
                start = index + 1
            }
            index += 1
        }
        return start
    }

    // MARK: - Fields

    private static func field(_ out: inout [UInt8], _ write: (inout [UInt8]) -> Void) {
        out.append(UInt8(ascii: " "))
        write(&out)
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    static func appendHex(_ out: inout [UInt8], _ value: UInt64) {
        for shift in stride(from: 60, through: 0, by: -4) {
            out.append(hexDigits[Int((value >> UInt64(shift)) & 15)])
        }
    }

    /// Exactly 16 lower-case hex digits; nil otherwise.
    static func hex64(_ field: UnsafeRawBufferPointer) -> UInt64? {
        guard field.count == 16 else { return nil }
        var value: UInt64 = 0
        for byte in field {
            guard let digit = hexDigit(byte) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    /// `hex64` of any bytes.
    static func hex64<Bytes: Collection>(_ field: Bytes) -> UInt64? where Bytes.Element == UInt8 {
        Array(field).withUnsafeBytes { hex64($0) }
    }

    /// A decimal number from 0 through `max`, at most 18 digits; nil otherwise (never traps).
    static func decimal<Bytes: Collection>(_ field: Bytes, max: Int) -> Int? where Bytes.Element == UInt8 {
        guard !field.isEmpty, field.count <= 18 else { return nil }
        var value = 0
        for byte in field {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0")) // 18 digits cannot overflow
        }
        return value <= max ? value : nil
    }

    /// A finite date from a Double's bit pattern in hex.
    private static func date(_ field: UnsafeRawBufferPointer) -> Date? {
        guard let bits = hex64(field) else { return nil }
        let seconds = Double(bitPattern: bits)
        return seconds.isFinite ? Date(timeIntervalSinceReferenceDate: seconds) : nil
    }

    private static func escape(_ out: inout [UInt8], _ text: String) {
        for byte in text.utf8 {
            if byte <= 0x20 || byte == 0x25 || byte == 0x7F {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 15)])
            } else {
                out.append(byte)
            }
        }
    }

    /// Calls `body` with the field's bytes, `%XX` escapes decoded (nil for a bad escape).
    private static func withUnescaped<T>(_ field: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> T?) -> T? {
        guard field.contains(UInt8(ascii: "%")) else { return body(field) }
        var out = [UInt8]()
        out.reserveCapacity(field.count)
        var index = 0
        while index < field.count {
            let byte = field[index]
            index += 1
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard index + 2 <= field.count, let high = hexDigit(field[index]), let low = hexDigit(field[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out.withUnsafeBytes(body)
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
