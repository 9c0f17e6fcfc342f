import Foundation

/// The bytes of one stored entry, and back: the disk store's files, and the values of any
/// store that keeps entries as bytes.
///
/// Layout (version 4, little-endian), body first so a reader can hand the body out of the
/// bytes it read without copying it:
///
///     body                 bodyLength bytes
///     metadata             metadataLength bytes: flags, status, stored-at, generation,
///                          windows?, useful-until?, transform name? (flag 4: the body is
///                          that transform's encoding), partial content? (flag 8: the
///                          complete length u64, the span count u32, each span's first byte
///                          and end u64; the body is those spans' bytes), the key's storage
///                          string, the URL, header fields and vary values (sorted by the
///                          UTF-8 of their names)
///     trailer (40 bytes)   bodyLength u64, metadataLength u32, 0 u32,
///                          body checksum u64 (`BodyChecksum` of the body),
///                          metadata checksum u64 (XXH3 of the metadata and the first 24
///                          trailer bytes), magic "HTCE", version u8, three zero bytes
///
/// Every length is checked against what is there, so truncated, damaged or foreign bytes are
/// a `DecodeError`, never a crash or a partial body. The metadata can be read and checked on
/// its own (from the end of a file), without the body.
///
/// Flag 8 came after version 4 was first written, without a new version: every version-4
/// encoding without it reads as before, and a release that does not know the flag takes an
/// entry with it for damage (a miss, removed), never for a whole response.
enum EntryFileFormat {
    static let magic: [UInt8] = Array("HTCE".utf8)
    static let version: UInt8 = 4
    /// The fixed trailer at the end of every encoding.
    static let trailerSize = 40

    /// Why bytes are not an entry.
    enum DecodeError: Error, Equatable, CustomStringConvertible {
        /// Shorter than the trailer, or lengths that do not add up to the bytes there.
        case truncated
        /// No entry magic: not an entry at all.
        case notAnEntry
        /// An entry of another format version (an older release): a miss, not damage.
        case unsupportedVersion(UInt8)
        /// A checksum does not match: damaged bytes.
        case checksumMismatch
        /// Checksums match but a field is impossible.
        case malformed(String)
        /// Whole and intact, but stored under another key (a file-name collision): a miss,
        /// and the bytes belong to that other key.
        case keyMismatch
        /// Whole and intact, but the store's transform could not decode the body: a store
        /// failure, not damage (the entry stays).
        case transformFailed(String)

        var description: String {
            switch self {
            case .truncated: "truncated: the lengths do not match the bytes"
            case .notAnEntry: "not an entry"
            case .unsupportedVersion(let version): "entry format version \(version) is not supported"
            case .checksumMismatch: "checksum mismatch: the entry is damaged"
            case .malformed(let what): "malformed entry: \(what)"
            case .keyMismatch: "the entry holds another key"
            case .transformFailed(let reason): "the store's transform could not decode the body: \(reason)"
            }
        }
    }

    /// The trailer's fields, read from the last 40 bytes.
    struct Trailer {
        var bodyLength: Int
        var metadataLength: Int
        var bodyChecksum: UInt64
        var metadataChecksum: UInt64

        /// The whole encoding's length.
        var totalLength: Int { bodyLength + metadataLength + EntryFileFormat.trailerSize }
    }

    // MARK: - Encoding

    /// The whole encoding of an entry (its body already encoded by `transform`, when named).
    static func encode(_ entry: CacheEntry, transform: String? = nil) -> Data {
        let tail = encodeTail(entry, transform: transform)
        var data = Data(capacity: entry.body.count + tail.count)
        data.append(entry.body)
        data.append(contentsOf: tail)
        return data
    }

    /// The metadata and trailer of an entry: what follows its body.
    static func encodeTail(_ entry: CacheEntry, transform: String? = nil) -> [UInt8] {
        encodeTail(entry, bodyLength: entry.body.count, bodyChecksum: entry.body.withUnsafeBytes { BodyChecksum.checksum($0) },
                   transform: transform)
    }

    /// The metadata and trailer of an entry whose body (`bodyLength` bytes with this
    /// checksum) was written before, in parts; `entry.body` is not read.
    /// A `transform` named here is stored with the entry (flag 4): its body is that
    /// transform's encoding.
    static func encodeTail(_ entry: CacheEntry, bodyLength: Int, bodyChecksum: UInt64, transform: String? = nil) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(256 + entry.key.url.utf8.count * 2)
        var flags: UInt8 = 0
        if entry.windows != nil { flags |= 1 }
        if entry.usefulUntil != nil { flags |= 2 }
        if transform != nil { flags |= 4 }
        if entry.partialContent != nil { flags |= 8 }
        out.append(flags)
        append(&out, Int64(entry.statusCode))
        append(&out, entry.storedAt.timeIntervalSinceReferenceDate.bitPattern)
        append(&out, entry.generation)
        if let windows = entry.windows {
            append(&out, windows.fresh.bitPattern)
            append(&out, windows.usable.bitPattern)
        }
        if let usefulUntil = entry.usefulUntil { append(&out, usefulUntil.timeIntervalSinceReferenceDate.bitPattern) }
        if let transform { appendString(&out, transform) }
        if let parts = entry.partialContent {
            append(&out, UInt64(parts.completeLength))
            append(&out, UInt32(parts.spans.count))
            for span in parts.spans {
                append(&out, UInt64(span.lowerBound))
                append(&out, UInt64(span.upperBound))
            }
        }
        appendString(&out, entry.key.storageString)
        appendString(&out, entry.url.absoluteString)
        for fields in [entry.headers, entry.varyValues] {
            append(&out, UInt32(fields.count))
            for (name, value) in fields.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                appendString(&out, name)
                appendString(&out, value)
            }
        }
        let metadataLength = out.count
        append(&out, UInt64(bodyLength))
        append(&out, UInt32(metadataLength))
        append(&out, UInt32(0))
        append(&out, bodyChecksum)
        let metadataChecksum = out.withUnsafeBytes { XXH3.hash($0) }
        append(&out, metadataChecksum)
        out += magic
        out += [version, 0, 0, 0]
        return out
    }

    // MARK: - Decoding

    /// Decodes a whole encoding. The body shares the bytes of `data` (no copy) when `data`
    /// starts at index 0.
    /// - Parameter key: the key the caller asked for; bytes holding another key (a file-name
    ///   collision, or a foreign file) throw `.keyMismatch`, never give the wrong response.
    /// - Throws: `DecodeError` for anything but a whole, intact entry of this version.
    static func decode(_ data: Data, expecting key: CacheKey? = nil) throws(DecodeError) -> CacheEntry {
        try decodeWithTransform(data, expecting: key).entry
    }

    /// Decodes a whole encoding, with the name of the transform that encoded its body (nil:
    /// none); the body is returned as stored.
    /// - Throws: `DecodeError` for anything but a whole, intact entry of this version.
    static func decodeWithTransform(_ data: Data, expecting key: CacheKey? = nil) throws(DecodeError) -> (entry: CacheEntry, transform: String?) {
        let expected = key.map { (key: $0, bytes: EntryName.storageBytes(of: $0)) }
        let result: Result<(Int, Metadata?), DecodeError> = data.withUnsafeBytes { raw in
            do throws(DecodeError) { return .success(try decode(raw, expecting: expected, reusing: nil)) } catch { return .failure(error) }
        }
        let (bodyLength, metadata) = try result.get()
        var entry = metadata!.entry
        entry.body = data.startIndex == 0 ? data.prefix(bodyLength) : Data(data.prefix(bodyLength))
        return (entry, metadata!.transform)
    }

    /// An entry's metadata as decoded once, so a later read of the same bytes (the same
    /// metadata checksum, verified against those bytes) can skip parsing them.
    struct Metadata: Sendable {
        /// The entry without its body, under the stored key (or the expected one, equal to it).
        var entry: CacheEntry
        var checksum: UInt64
        var length: Int
        /// The stored key's storage string.
        var keyBytes: [UInt8]
        /// The transform that encoded the body, if any.
        var transform: String?
    }

    /// Checks and decodes a whole encoding in memory, comparing the stored key with
    /// `key.bytes` (the expected key's storage string, which the caller has at hand). Both
    /// checksums are always verified against the bytes; metadata whose checksum and length
    /// match `cached` is not parsed again.
    /// - Returns: the body's length (the body is the first bytes), and the metadata, or nil
    ///   when it is `cached`'s.
    static func decode(_ raw: UnsafeRawBufferPointer, expecting key: (key: CacheKey, bytes: [UInt8])?,
                       reusing cached: Metadata?) throws(DecodeError) -> (bodyLength: Int, metadata: Metadata?) {
        let trailer = try readTrailer(raw, totalLength: raw.count)
        guard trailer.totalLength == raw.count else { throw .truncated }
        let body = UnsafeRawBufferPointer(rebasing: raw[0..<trailer.bodyLength])
        guard BodyChecksum.checksum(body) == trailer.bodyChecksum else { throw .checksumMismatch }
        let metadata = UnsafeRawBufferPointer(rebasing: raw[trailer.bodyLength..<(raw.count - trailerSize)])
        if let cached, cached.checksum == trailer.metadataChecksum, cached.length == trailer.metadataLength {
            try verifyMetadataChecksum(metadata, trailer)
            if let key, !equal(key.bytes, cached.keyBytes) { throw .keyMismatch }
            return (trailer.bodyLength, nil)
        }
        return (trailer.bodyLength, try decodeMetadata(metadata, trailer: trailer, expecting: key))
    }

    private static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && a.withUnsafeBytes { a in b.withUnsafeBytes { b in memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }
    }

    /// The trailer at the end of `raw`, which ends an encoding of `totalLength` bytes (all of
    /// it, or only its end when reading metadata alone); checks magic, version and that the
    /// lengths fit in `totalLength`.
    static func readTrailer(_ raw: UnsafeRawBufferPointer, totalLength: Int) throws(DecodeError) -> Trailer {
        guard raw.count >= trailerSize else {
            if raw.count >= 5, Array(raw[0..<4]) == magic, raw[4] < version { throw .unsupportedVersion(raw[4]) }
            throw .truncated
        }
        let t = raw.count - trailerSize
        guard raw[t + 32] == magic[0], raw[t + 33] == magic[1], raw[t + 34] == magic[2], raw[t + 35] == magic[3] else {
            // Version 2 and earlier put the magic and version first.
            if raw.count == totalLength, Array(raw[0..<4]) == magic, raw[4] < version { throw .unsupportedVersion(raw[4]) }
            throw .notAnEntry
        }
        guard raw[t + 36] == version else { throw .unsupportedVersion(raw[t + 36]) }
        guard raw[t + 37] == 0, raw[t + 38] == 0, raw[t + 39] == 0, load(raw, t + 12, UInt32.self) == 0 else {
            throw .checksumMismatch
        }
        let bodyLength = load(raw, t, UInt64.self)
        let metadataLength = Int(load(raw, t + 8, UInt32.self))
        let room = totalLength - trailerSize
        guard metadataLength <= room, bodyLength <= UInt64(room - metadataLength) else { throw .truncated }
        return Trailer(bodyLength: Int(bodyLength), metadataLength: metadataLength,
                       bodyChecksum: load(raw, t + 16, UInt64.self), metadataChecksum: load(raw, t + 24, UInt64.self))
    }

    /// Checks the metadata checksum: over the metadata and the first 24 trailer bytes, which
    /// follow it in memory.
    private static func verifyMetadataChecksum(_ metadata: UnsafeRawBufferPointer, _ trailer: Trailer) throws(DecodeError) {
        let covered = UnsafeRawBufferPointer(start: metadata.baseAddress, count: metadata.count + 24)
        guard metadata.count == trailer.metadataLength, XXH3.hash(covered) == trailer.metadataChecksum else {
            throw .checksumMismatch
        }
    }

    /// The entry described by the metadata (its body left empty), after checking the metadata
    /// checksum. `metadata` must be followed in memory by the trailer it was read with.
    static func decodeMetadata(_ metadata: UnsafeRawBufferPointer, trailer: Trailer,
                               expecting key: (key: CacheKey, bytes: [UInt8])?) throws(DecodeError) -> Metadata {
        try verifyMetadataChecksum(metadata, trailer)
        var reader = Reader(bytes: metadata, offset: 0)
        let flags = try reader.byte()
        guard flags & ~15 == 0 else { throw .malformed("unknown flags") }
        let status = try reader.integer(Int64.self)
        guard let statusCode = Int(exactly: status) else { throw .malformed("status") }
        let storedSeconds = Double(bitPattern: try reader.integer(UInt64.self))
        // A time that is not finite or absurdly far away is damage (and printing such a date traps).
        guard storedSeconds.isFinite, abs(storedSeconds) < 1e11 else { throw .malformed("stored-at") }
        let storedAt = Date(timeIntervalSinceReferenceDate: storedSeconds)
        let generation = try reader.integer(UInt64.self)
        var windows: CacheWindows?
        if flags & 1 != 0 {
            let fresh = Double(bitPattern: try reader.integer(UInt64.self))
            let usable = Double(bitPattern: try reader.integer(UInt64.self))
            guard let valid = try? CacheWindows(fresh: fresh, usable: usable) else { throw .malformed("windows") }
            windows = valid
        }
        var usefulUntil: Date?
        if flags & 2 != 0 {
            let seconds = Double(bitPattern: try reader.integer(UInt64.self))
            guard seconds.isFinite, abs(seconds) < 1e11 else { throw .malformed("useful-until") }
            usefulUntil = Date(timeIntervalSinceReferenceDate: seconds)
        }
        let transform = flags & 4 != 0 ? try reader.string() : nil
        let partialContent = flags & 8 != 0 ? try reader.partialContent() : nil
        if transform == nil, let partialContent, partialContent.storedBytes != trailer.bodyLength {
            throw .malformed("the body is not the length of the spans")
        }
        let storedKey = try reader.slice()
        let entryKey = try decodeKey(storedKey, expecting: key)
        // Strict: a field with characters a URL may not hold is damage, not a URL to escape.
        guard let url = URL(string: try reader.string(), encodingInvalidCharacters: false) else { throw .malformed("URL") }
        let headers = try reader.fields()
        let varyValues = try reader.fields()
        guard reader.offset == metadata.count else { throw .malformed("trailing bytes") }
        let entry = CacheEntry(key: entryKey, url: url, statusCode: statusCode, headers: headers, body: Data(),
                               storedAt: storedAt, windows: windows, varyValues: varyValues,
                               generation: generation, usefulUntil: usefulUntil, partialContent: partialContent)
        return Metadata(entry: entry, checksum: trailer.metadataChecksum, length: metadata.count, keyBytes: Array(storedKey),
                        transform: transform)
    }

    /// The key of the stored storage string: `key.key` when it is `key.bytes`, else
    /// `.keyMismatch` (or `.malformed` if it is no key at all); parsed when nothing is expected.
    private static func decodeKey(_ storedKey: UnsafeRawBufferPointer,
                                  expecting key: (key: CacheKey, bytes: [UInt8])?) throws(DecodeError) -> CacheKey {
        guard let key else {
            guard let parsed = String(validating: storedKey, as: UTF8.self).flatMap(CacheKey.init(storageString:)) else {
                throw .malformed("key")
            }
            return parsed
        }
        let matches = key.bytes.count == storedKey.count
            && key.bytes.withUnsafeBytes { memcmp($0.baseAddress!, storedKey.baseAddress!, storedKey.count) == 0 }
        guard matches else {
            guard String(validating: storedKey, as: UTF8.self).flatMap(CacheKey.init(storageString:)) != nil else {
                throw .malformed("key")
            }
            throw .keyMismatch
        }
        return key.key
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset: Int

        mutating func byte() throws(DecodeError) -> UInt8 {
            guard offset < bytes.count else { throw .malformed("truncated metadata") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DecodeError) -> T {
            guard bytes.count - offset >= MemoryLayout<T>.size else { throw .malformed("truncated metadata") }
            defer { offset += MemoryLayout<T>.size }
            return load(bytes, offset, T.self)
        }

        mutating func slice() throws(DecodeError) -> UnsafeRawBufferPointer {
            let length = Int(try integer(UInt32.self))
            guard length <= bytes.count - offset else { throw .malformed("truncated string") }
            defer { offset += length }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
        }

        mutating func string() throws(DecodeError) -> String {
            try EntryFileFormat.string(try slice())
        }

        /// The spans of a partial entry, checked as `PartialContent` requires.
        mutating func partialContent() throws(DecodeError) -> PartialContent {
            let length = try integer(UInt64.self)
            let count = Int(try integer(UInt32.self))
            guard count <= (bytes.count - offset) / 16, length <= UInt64(Int.max) else { throw .malformed("impossible span count") }
            var spans: [Range<Int>] = []
            spans.reserveCapacity(count)
            for _ in 0..<count {
                let start = try integer(UInt64.self), end = try integer(UInt64.self)
                guard start <= end, end <= length else { throw .malformed("partial content") }
                spans.append(Int(start)..<Int(end))
            }
            guard let parts = PartialContent(completeLength: Int(length), spans: spans) else { throw .malformed("partial content") }
            return parts
        }

        /// Name-value pairs, names' UTF-8 strictly ascending (the one order the encoder writes).
        mutating func fields() throws(DecodeError) -> [String: String] {
            let count = Int(try integer(UInt32.self))
            guard count <= (bytes.count - offset) / 8 else { throw .malformed("impossible field count") }
            var fields: [String: String] = [:]
            fields.reserveCapacity(count)
            var previous: UnsafeRawBufferPointer?
            for _ in 0..<count {
                let name = try slice()
                if let previous, !previous.lexicographicallyPrecedes(name) { throw .malformed("fields out of order") }
                fields[try EntryFileFormat.string(name)] = try string()
                previous = name
            }
            // Names that differ in bytes but not as Strings (canonically equivalent) would
            // merge: not an encoding the encoder makes.
            guard fields.count == count else { throw .malformed("duplicate field names") }
            return fields
        }
    }

    /// Valid UTF-8 as a String (ASCII, the common case, without the general validator).
    private static func string(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> String {
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        guard let string = String(validating: bytes, as: UTF8.self) else { throw .malformed("invalid UTF-8") }
        return string
    }

    private static func load<T: FixedWidthInteger>(_ raw: UnsafeRawBufferPointer, _ offset: Int, _: T.Type) -> T {
        T(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    private static func append<T: FixedWidthInteger>(_ out: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value.littleEndian) { out += $0 }
    }

    private static func appendString(_ out: inout [UInt8], _ string: String) {
        append(&out, UInt32(truncatingIfNeeded: string.utf8.count))
        out += string.utf8
    }
}
