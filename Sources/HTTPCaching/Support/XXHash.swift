/// xxHash (XXH64 and XXH3-64, seed 0 for XXH3), small and dependency-free: fast
/// non-cryptographic hashes that name disk entries and check them for damage. They guard
/// against corruption, not against an attacker: the full key inside each file is compared.
///
/// Both follow the reference implementation (github.com/Cyan4973/xxHash) bit for bit; the
/// tests pin them to its published vectors.
enum XXH64 {
    static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    /// The 64-bit XXH64 digest of `buffer`.
    static func hash(_ buffer: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = buffer.count
        var offset = 0
        var h: UInt64
        if count >= 32, let base = buffer.baseAddress {
            var v1 = seed &+ prime1 &+ prime2, v2 = seed &+ prime2, v3 = seed, v4 = seed &- prime1
            while offset + 32 <= count {
                v1 = round(v1, base.loadLE64(offset))
                v2 = round(v2, base.loadLE64(offset + 8))
                v3 = round(v3, base.loadLE64(offset + 16))
                v4 = round(v4, base.loadLE64(offset + 24))
                offset += 32
            }
            h = v1.rotated(1) &+ v2.rotated(7) &+ v3.rotated(12) &+ v4.rotated(18)
            h = merge(h, v1); h = merge(h, v2); h = merge(h, v3); h = merge(h, v4)
        } else {
            h = seed &+ prime5
        }
        h &+= UInt64(count)
        while offset + 8 <= count {
            h ^= round(0, buffer.baseAddress!.loadLE64(offset))
            h = h.rotated(27) &* prime1 &+ prime4
            offset += 8
        }
        if offset + 4 <= count {
            h ^= UInt64(buffer.baseAddress!.loadLE32(offset)) &* prime1
            h = h.rotated(23) &* prime2 &+ prime3
            offset += 4
        }
        while offset < count {
            h ^= UInt64(buffer[offset]) &* prime5
            h = h.rotated(11) &* prime1
            offset += 1
        }
        return avalanche(h)
    }

    /// The digest of some bytes.
    static func hash<Bytes: Sequence>(_ bytes: Bytes, seed: UInt64 = 0) -> UInt64 where Bytes.Element == UInt8 {
        bytes.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0), seed: seed) }
            ?? Array(bytes).withUnsafeBytes { hash($0, seed: seed) }
    }

    @inline(__always) private static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        (acc &+ input &* prime2).rotated(31) &* prime1
    }

    @inline(__always) private static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* prime1 &+ prime4
    }

    @inline(__always) static func avalanche(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 33; h &*= prime2; h ^= h >> 29; h &*= prime3; h ^= h >> 32
        return h
    }
}

/// XXH3-64 with seed 0 and the default secret: the fastest of the family on long input (its
/// inner loop runs eight 64-bit lanes, which the compiler vectorizes), so checking a body
/// costs a fraction of reading it.
enum XXH3 {
    /// The 64-bit XXH3 digest of `buffer`.
    static func hash(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        secret.withUnsafeBytes { secret in
            hash(buffer, secret: secret.baseAddress!)
        }
    }

    /// The digest of some bytes.
    static func hash<Bytes: Sequence>(_ bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        bytes.withContiguousStorageIfAvailable { hash(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { hash($0) }
    }

    private static func hash(_ buffer: UnsafeRawBufferPointer, secret s: UnsafeRawPointer) -> UInt64 {
        let length = buffer.count
        guard let p = buffer.baseAddress, length > 0 else {
            return XXH64.avalanche(s.loadLE64(56) ^ s.loadLE64(64))
        }
        switch length {
        case 1...3: return hash1to3(p, length, s)
        case 4...8: return hash4to8(p, length, s)
        case 9...16: return hash9to16(p, length, s)
        case 17...128: return hash17to128(p, length, s)
        case 129...240: return hash129to240(p, length, s)
        default: return hashLong(p, length, s)
        }
    }

    /// 1 to 3 bytes.
    @inline(__always) private static func hash1to3(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        let combined = (UInt32(p.load(fromByteOffset: 0, as: UInt8.self)) << 16)
            | (UInt32(p.load(fromByteOffset: length >> 1, as: UInt8.self)) << 24)
            | UInt32(p.load(fromByteOffset: length - 1, as: UInt8.self)) | (UInt32(length) << 8)
        let flip = UInt64(s.loadLE32(0) ^ s.loadLE32(4))
        return XXH64.avalanche(UInt64(combined) ^ flip)
    }

    /// 4 to 8 bytes.
    @inline(__always) private static func hash4to8(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        let input = UInt64(p.loadLE32(length - 4)) &+ (UInt64(p.loadLE32(0)) << 32)
        var h = input ^ (s.loadLE64(8) ^ s.loadLE64(16))
        h ^= h.rotated(49) ^ h.rotated(24)
        h &*= 0x9FB2_1C65_1E98_DF25
        h ^= (h >> 35) &+ UInt64(length)
        h &*= 0x9FB2_1C65_1E98_DF25
        return h ^ (h >> 28)
    }

    /// 9 to 16 bytes.
    @inline(__always) private static func hash9to16(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        let low = p.loadLE64(0) ^ (s.loadLE64(24) ^ s.loadLE64(32))
        let high = p.loadLE64(length - 8) ^ (s.loadLE64(40) ^ s.loadLE64(48))
        return avalanche(UInt64(length) &+ low.byteSwapped &+ high &+ fold(low, high))
    }

    /// 17 to 128 bytes: pairs of 16-byte mixes from both ends.
    @inline(__always) private static func hash17to128(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        var acc = UInt64(length) &* XXH64.prime1
        if length > 32 {
            if length > 64 {
                if length > 96 {
                    acc &+= mix16(p + 48, s + 96)
                    acc &+= mix16(p + length - 64, s + 112)
                }
                acc &+= mix16(p + 32, s + 64)
                acc &+= mix16(p + length - 48, s + 80)
            }
            acc &+= mix16(p + 16, s + 32)
            acc &+= mix16(p + length - 32, s + 48)
        }
        acc &+= mix16(p, s)
        acc &+= mix16(p + length - 16, s + 16)
        return avalanche(acc)
    }

    /// 129 to 240 bytes: 16-byte mixes, avalanched after the first eight.
    @inline(__always) private static func hash129to240(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        var acc = UInt64(length) &* XXH64.prime1
        for i in 0..<8 { acc &+= mix16(p + 16 * i, s + 16 * i) }
        acc = avalanche(acc)
        for i in 8..<(length / 16) { acc &+= mix16(p + 16 * i, s + 16 * (i - 8) + 3) }
        acc &+= mix16(p + length - 16, s + 119)
        return avalanche(acc)
    }

    /// More than 240 bytes: 64-byte stripes into eight lanes, scrambled every 1,024 bytes.
    private static func hashLong(_ p: UnsafeRawPointer, _ length: Int, _ s: UnsafeRawPointer) -> UInt64 {
        var acc = SIMD8<UInt64>(0xC2B2_AE3D, XXH64.prime1, XXH64.prime2, XXH64.prime3,
                                XXH64.prime4, 0x85EB_CA77, XXH64.prime5, 0x9E37_79B1)
        let stripesPerBlock = 16, blockLength = 1024
        let blocks = (length - 1) / blockLength
        let scrambleKey = s.loadUnaligned(fromByteOffset: 128, as: SIMD8<UInt64>.self)
        for block in 0..<blocks {
            let base = p + block * blockLength
            for stripe in 0..<stripesPerBlock { accumulate(&acc, base + stripe * 64, s + stripe * 8) }
            acc ^= acc &>> 47
            acc ^= scrambleKey
            acc &*= SIMD8(repeating: 0x9E37_79B1)
        }
        let base = p + blocks * blockLength
        let stripes = ((length - 1) - blocks * blockLength) / 64
        for stripe in 0..<stripes { accumulate(&acc, base + stripe * 64, s + stripe * 8) }
        accumulate(&acc, p + length - 64, s + 121)
        var result = UInt64(length) &* XXH64.prime1
        for i in 0..<4 {
            result &+= fold(acc[2 * i] ^ s.loadLE64(11 + 16 * i), acc[2 * i + 1] ^ s.loadLE64(19 + 16 * i))
        }
        return avalanche(result)
    }

    @inline(__always) private static func accumulate(_ acc: inout SIMD8<UInt64>, _ p: UnsafeRawPointer, _ s: UnsafeRawPointer) {
        var data = p.loadUnaligned(as: SIMD8<UInt64>.self)
        var key = s.loadUnaligned(as: SIMD8<UInt64>.self)
        #if _endian(big)
        for i in 0..<8 { data[i] = data[i].byteSwapped; key[i] = key[i].byteSwapped }
        #endif
        key ^= data
        let swapped = SIMD8<UInt64>(data[1], data[0], data[3], data[2], data[5], data[4], data[7], data[6])
        acc &+= swapped &+ (key & SIMD8(repeating: 0xFFFF_FFFF)) &* (key &>> 32)
    }

    @inline(__always) private static func mix16(_ p: UnsafeRawPointer, _ s: UnsafeRawPointer) -> UInt64 {
        fold(p.loadLE64(0) ^ s.loadLE64(0), p.loadLE64(8) ^ s.loadLE64(8))
    }

    /// The 128-bit product of two words, its halves xored.
    @inline(__always) private static func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let product = a.multipliedFullWidth(by: b)
        return product.high ^ product.low
    }

    @inline(__always) private static func avalanche(_ value: UInt64) -> UInt64 {
        var h = value
        h ^= h >> 37
        h &*= 0x1656_6791_9E37_79F9
        return h ^ (h >> 32)
    }

    /// The default secret of the reference implementation.
    private static let secret: [UInt8] = [
        0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
        0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
        0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
        0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
        0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
        0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
        0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
        0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
        0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
        0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
        0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
        0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
    ]
}

extension UInt64 {
    @inline(__always) fileprivate func rotated(_ n: UInt64) -> UInt64 { (self << n) | (self >> (64 - n)) }
}

extension UnsafeRawPointer {
    @inline(__always) fileprivate func loadLE64(_ offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always) fileprivate func loadLE32(_ offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
}
