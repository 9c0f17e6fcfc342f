import Foundation

/// How a `RedisResponseStore` lays its data out in Redis.
///
/// Every key starts with the configured prefix:
/// - `<prefix>e<format>:{<base>}[<variant>]`: one entry, a hash of two fields, `m` (the small
///   metadata below, for listing without bodies) and `d` (the entry in `EntryFileFormat`).
///   `<base>` is the SHA-256 (hex) of the `storageString` of the entry's base key (its key
///   without a `Vary` variant); a variant's entry adds the SHA-256 of its whole key. One key
///   per entry, so its time to live and Redis's own eviction always take both fields
///   together: listing never finds metadata whose body is gone. `<format>` names the versions
///   of both encodings (`2-1`), so during a rolling upgrade hosts of two versions sharing a
///   server miss each other's entries instead of deleting them as damaged; listing and
///   removal cover every version.
/// - `<prefix>claim:{<base>}[<variant>]`: a background-refresh claim, a random token with the
///   lease as its time to live.
/// - `<prefix>secret`: the 32-byte partition secret, with no time to live.
///
/// `{<base>}` is a Redis Cluster hash tag: the entry under a URL, its variants (which the
/// entry under the URL lists) and their claims all hash to one slot, so they live on one node
/// and any command or transaction may touch several of them together.
struct RedisEntryLayout: Sendable {
    let prefix: [UInt8]

    init(prefix: String) {
        self.prefix = Array(prefix.utf8)
    }

    /// The versions of the two encodings an entry is written in.
    static let format = "\(EntryFileFormat.version)-\(RedisEntryMetadata.version)"

    func entryKey(_ key: CacheKey) -> [UInt8] {
        prefix + Array("e\(Self.format):".utf8) + Self.tagged(key)
    }

    func claimKey(_ key: CacheKey) -> [UInt8] {
        prefix + Array("claim:".utf8) + Self.tagged(key)
    }

    var secretKey: [UInt8] { prefix + Array("secret".utf8) }

    /// What every entry key, of every format, starts with: the prefix, then `e`.
    var entryPrefix: [UInt8] { prefix + Array("e".utf8) }

    /// The `SCAN MATCH` pattern of every entry key, of every format: the prefix with its glob
    /// characters escaped, then `e*`.
    var entryPattern: [UInt8] {
        var pattern: [UInt8] = []
        for byte in prefix {
            if [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "\\")].contains(byte) {
                pattern.append(UInt8(ascii: "\\"))
            }
            pattern.append(byte)
        }
        return pattern + Array("e*".utf8)
    }

    /// `{<digest of the base key>}`, then the digest of the whole key for a variant.
    private static func tagged(_ key: CacheKey) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(key.variant == nil ? 66 : 130)
        if key.variant == nil {
            bytes += digest(key.storageString)
            bytes.append(UInt8(ascii: "}"))
        } else {
            bytes += digest(key.primary.storageString)
            bytes.append(UInt8(ascii: "}"))
            bytes += digest(key.storageString)
        }
        return bytes
    }

    private static func digest(_ text: String) -> [UInt8] {
        Array(SHA256.hex(SHA256.hash(text.utf8)).utf8)
    }

    /// The time to live Redis gives an entry, in milliseconds: how long it can still be of
    /// use, from its own times (`usefulUntil - storedAt`, not the wall clock, which the cache
    /// may not share), capped by `cap`; `cap` when it has no known end. nil when it is of no
    /// use at all.
    static func timeToLive(of entry: CacheEntry, cap: TimeInterval) -> Int? {
        let seconds = entry.usefulUntil.map { min($0.timeIntervalSince(entry.storedAt), cap) } ?? cap
        guard seconds > 0 else { return nil } // also NaN
        return max(1, Int(min(seconds * 1000, 1e15).rounded(.up))) // at most ~31,000 years
    }

    // MARK: - Scripts

    /// Deletes `KEYS[1]` only if its field `m` still equals `ARGV[1]`: an entry replaced since
    /// it was listed is kept.
    static let deleteIfMetadataMatches = """
        if redis.call('HGET', KEYS[1], 'm') == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0
        """

    /// Deletes `KEYS[1]` only if it still holds the token `ARGV[1]`: a claim that expired and
    /// was taken by another holder is left alone.
    static let deleteIfTokenMatches = """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0
        """
}

/// The field `m` of an entry's hash: what listing needs, without the body.
///
/// Layout (little-endian): magic `HTCM`, version 2, stored-at (Float64 seconds since 2001, the
/// reference date `Date` holds, so a time round-trips exactly and agrees with the entry's own),
/// status (Int32), byte count (UInt64), generation (UInt64), a flag byte and useful-until
/// (Float64, present when the flag is 1), then the key's `storageString` to the end.
struct RedisEntryMetadata: Equatable {
    var storageString: String
    var storedAt: Date
    var statusCode: Int
    var byteCount: Int
    var generation: UInt64
    var usefulUntil: Date?

    struct DecodeError: Error, CustomStringConvertible {
        let description: String
        /// Whether it is metadata of another version (from an older or newer host), not damage.
        var isOtherVersion = false
    }

    static let magic = Array("HTCM".utf8)
    static let version: UInt8 = 2

    init(_ entry: CacheEntry) {
        storageString = entry.key.storageString
        storedAt = entry.storedAt
        statusCode = entry.statusCode
        byteCount = entry.byteCount
        generation = entry.generation
        usefulUntil = entry.usefulUntil
    }

    var encoded: [UInt8] {
        var out = Self.magic
        out.append(Self.version)
        append(&out, storedAt.timeIntervalSinceReferenceDate.bitPattern)
        append(&out, UInt32(truncatingIfNeeded: statusCode))
        append(&out, UInt64(byteCount))
        append(&out, generation)
        out.append(usefulUntil == nil ? 0 : 1)
        if let usefulUntil { append(&out, usefulUntil.timeIntervalSinceReferenceDate.bitPattern) }
        out += storageString.utf8
        return out
    }

    init(decoding bytes: [UInt8]) throws(DecodeError) {
        var reader = Reader(bytes: bytes)
        guard bytes.count >= 34, Array(bytes[0..<4]) == Self.magic else { throw DecodeError(description: "not entry metadata") }
        reader.offset = 4
        guard try reader.byte() == Self.version else {
            throw DecodeError(description: "metadata of another version (\(bytes[4]))", isOtherVersion: true)
        }
        let storedSeconds = Double(bitPattern: try reader.integer(UInt64.self))
        // A time that is not finite or absurdly far away is damage (and printing such a date traps).
        guard storedSeconds.isFinite, abs(storedSeconds) < 1e11 else { throw DecodeError(description: "an impossible stored-at time") }
        storedAt = Date(timeIntervalSinceReferenceDate: storedSeconds)
        statusCode = Int(Int32(bitPattern: try reader.integer(UInt32.self)))
        let count = try reader.integer(UInt64.self)
        guard count <= UInt64(Int.max) else { throw DecodeError(description: "impossible byte count") }
        byteCount = Int(count)
        generation = try reader.integer(UInt64.self)
        switch try reader.byte() {
        case 0: usefulUntil = nil
        case 1:
            let seconds = Double(bitPattern: try reader.integer(UInt64.self))
            guard seconds.isFinite, abs(seconds) < 1e11 else { throw DecodeError(description: "an impossible useful-until time") }
            usefulUntil = Date(timeIntervalSinceReferenceDate: seconds)
        default: throw DecodeError(description: "an invalid flag")
        }
        guard let text = String(validating: bytes[reader.offset...], as: UTF8.self) else {
            throw DecodeError(description: "a key that is not UTF-8")
        }
        storageString = text
    }

    /// The listing form, or nil if the stored key cannot be read back.
    var info: StoredEntryInfo? {
        CacheKey(storageString: storageString).map {
            StoredEntryInfo(key: $0, byteCount: byteCount, storedAt: storedAt, statusCode: statusCode, usefulUntil: usefulUntil)
        }
    }

    private func append<T: FixedWidthInteger>(_ out: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value.littleEndian) { out += $0 }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func byte() throws(DecodeError) -> UInt8 {
            guard offset < bytes.count else { throw DecodeError(description: "truncated") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DecodeError) -> T {
            guard bytes.count - offset >= MemoryLayout<T>.size else { throw DecodeError(description: "truncated") }
            var value: T = 0
            for index in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + index]) << (8 * index) }
            offset += MemoryLayout<T>.size
            return value
        }
    }
}
