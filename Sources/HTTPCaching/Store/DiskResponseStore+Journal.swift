import Foundation

// The disk store's journal `index.log` as text: one checksummed line per `JournalRecord`,
// written and parsed without trusting a byte of it.

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
