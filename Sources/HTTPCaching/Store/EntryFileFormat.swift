import Foundation

/// The bytes of one entry file, and back.
///
/// Layout (little-endian): magic `HTCE`, version, flags, stored-at, status, optional windows,
/// key method, key URL, response URL, header fields, vary values, body, then a checksum of everything
/// before it. Every length is checked against what remains, so a truncated, damaged or
/// foreign file is a `DecodeError`, never a crash or a partial body.
enum EntryFileFormat {
    static let magic: [UInt8] = Array("HTCE".utf8)
    static let version: UInt8 = 2

    struct DecodeError: Error, CustomStringConvertible {
        let description: String
    }

    static func encode(_ entry: CacheEntry) -> Data {
        var out = [UInt8]()
        out.reserveCapacity(entry.body.count + 512)
        out += magic
        out.append(version)
        out.append(entry.windows == nil ? 0 : 1)
        append(&out, entry.storedAt.timeIntervalSince1970.bitPattern)
        append(&out, UInt32(truncatingIfNeeded: entry.statusCode))
        if let windows = entry.windows {
            append(&out, windows.fresh.bitPattern)
            append(&out, windows.usable.bitPattern)
        }
        appendString(&out, entry.key.method)
        appendString(&out, entry.key.url)
        appendString(&out, entry.url.absoluteString)
        for fields in [entry.headers, entry.varyValues] {
            append(&out, UInt32(fields.count))
            for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
                appendString(&out, name)
                appendString(&out, value)
            }
        }
        append(&out, UInt64(entry.body.count))
        out += entry.body
        let checksum = out.withUnsafeBytes { Checksum64.of($0) }
        append(&out, checksum)
        return Data(out)
    }

    /// Decodes an entry file.
    /// - Parameter key: the key the caller asked for; a file holding another key (a hash
    ///   collision, or a foreign file) is an error, never the wrong response.
    static func decode(_ data: Data, expecting key: CacheKey? = nil) throws(DecodeError) -> CacheEntry {
        let result: Result<CacheEntry, DecodeError> = data.withUnsafeBytes { raw in
            do throws(DecodeError) {
                return .success(try decode(raw, expecting: key))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func decode(_ raw: UnsafeRawBufferPointer, expecting key: CacheKey?) throws(DecodeError) -> CacheEntry {
        guard raw.count >= 4 + 2 + 8 + 4 + 8 else { throw DecodeError(description: "file too short (\(raw.count) bytes)") }
        guard Array(raw[0..<4]) == magic else { throw DecodeError(description: "not an entry file") }
        guard raw[4] == version else { throw DecodeError(description: "unknown entry version \(raw[4])") }
        let payload = UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 8)])
        let stored = raw.loadUnaligned(fromByteOffset: raw.count - 8, as: UInt64.self)
        guard UInt64(littleEndian: stored) == Checksum64.of(payload) else {
            throw DecodeError(description: "checksum mismatch: the file is damaged or truncated")
        }
        var reader = Reader(bytes: payload, offset: 5)
        let flags = try reader.byte()
        let storedAt = Date(timeIntervalSince1970: Double(bitPattern: try reader.integer(UInt64.self)))
        let status = Int(Int32(bitPattern: try reader.integer(UInt32.self)))
        var windows: CacheWindows?
        if flags & 1 != 0 {
            let fresh = Double(bitPattern: try reader.integer(UInt64.self))
            let usable = Double(bitPattern: try reader.integer(UInt64.self))
            guard let valid = try? CacheWindows(fresh: fresh, usable: usable) else {
                throw DecodeError(description: "invalid windows")
            }
            windows = valid
        }
        let storedKey = CacheKey(method: try reader.string(), normalizedURL: try reader.string())
        if let key, key != storedKey { throw DecodeError(description: "the file holds another key (\(storedKey))") }
        guard let url = URL(string: try reader.string()) else { throw DecodeError(description: "invalid URL") }
        let headers = try reader.fields(limit: payload.count / 8)
        let varyValues = try reader.fields(limit: payload.count / 8)
        let bodyLength = try reader.integer(UInt64.self)
        guard bodyLength == UInt64(payload.count - reader.offset) else {
            throw DecodeError(description: "body length \(bodyLength) does not match the file")
        }
        let body = Data(UnsafeRawBufferPointer(rebasing: payload[reader.offset...]))
        return CacheEntry(key: storedKey, url: url, statusCode: status, headers: headers, body: body,
                          storedAt: storedAt, windows: windows, varyValues: varyValues)
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset: Int

        mutating func byte() throws(DecodeError) -> UInt8 {
            guard offset < bytes.count else { throw DecodeError(description: "truncated") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DecodeError) -> T {
            guard bytes.count - offset >= MemoryLayout<T>.size else { throw DecodeError(description: "truncated") }
            defer { offset += MemoryLayout<T>.size }
            return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
        }

        mutating func fields(limit: Int) throws(DecodeError) -> [String: String] {
            let count = Int(try integer(UInt32.self))
            guard count <= limit else { throw DecodeError(description: "impossible field count") }
            var fields: [String: String] = [:]
            for _ in 0..<count { fields[try string()] = try string() }
            return fields
        }

        mutating func string() throws(DecodeError) -> String {
            let length = Int(try integer(UInt32.self))
            guard length <= bytes.count - offset else { throw DecodeError(description: "truncated string") }
            defer { offset += length }
            guard let string = String(validating: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]), as: UTF8.self) else {
                throw DecodeError(description: "invalid UTF-8")
            }
            return string
        }
    }

    private static func append<T: FixedWidthInteger>(_ out: inout [UInt8], _ value: T) {
        withUnsafeBytes(of: value.littleEndian) { out += $0 }
    }

    private static func appendString(_ out: inout [UInt8], _ string: String) {
        append(&out, UInt32(string.utf8.count))
        out += string.utf8
    }
}
