/// The hash slot of a key in a Redis Cluster: `CRC16(key) mod 16384`, where CRC16 is the
/// XMODEM variant (polynomial 0x1021, initial value 0, not reflected, no final xor; "123456789"
/// gives 0x31C3), and where a key holding a hash tag is hashed by the tag alone: the bytes
/// between its first `{` and the first `}` after it, when there is at least one. Keys with the
/// same tag share a slot, so one command or transaction may touch them together.
enum RedisClusterSlot {
    /// How many hash slots a cluster has.
    static let count = 16_384

    /// The slot of a key.
    static func of(_ key: [UInt8]) -> Int {
        key.withUnsafeBufferPointer { bytes in
            Int(crc16(hashedPart(of: bytes)) & UInt16(count - 1))
        }
    }

    /// The bytes that decide a key's slot: its hash tag, or the whole key without one.
    static func hashedPart(of key: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
              let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else { return key }
        return UnsafeBufferPointer(rebasing: key[(open + 1)..<close])
    }

    /// CRC-16/XMODEM.
    static func crc16(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    /// CRC-16/XMODEM of bytes in an array.
    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        bytes.withUnsafeBufferPointer { crc16($0) }
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
