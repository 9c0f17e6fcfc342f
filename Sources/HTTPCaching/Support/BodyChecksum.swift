/// A checksum for detecting damaged bodies, about twice as fast as XXH3 on this hardware (it
/// needs only additions): Fletcher-style sums over the little-endian 64-bit words, in
/// sixteen lanes, with a second sum of the running sums so the position of every word counts;
/// the lanes and the length are then mixed into 64 bits.
///
/// Not a hash (inputs chosen to collide are easy to make, which only someone able to write
/// the store could use, and they could write any entry anyway). It detects every change
/// confined to one 8-byte word, any number of zeroed or flipped words whose sums do not
/// cancel, reordered blocks, and any change of length.
enum BodyChecksum {
    static func checksum(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        var a0 = SIMD8<UInt64>(), b0 = SIMD8<UInt64>(), a1 = SIMD8<UInt64>(), b1 = SIMD8<UInt64>()
        let count = buffer.count
        var offset = 0
        if let base = buffer.baseAddress {
            while offset + 128 <= count {
                a0 &+= load(base + offset)
                b0 &+= a0
                a1 &+= load(base + offset + 64)
                b1 &+= a1
                offset += 128
            }
        }
        if offset < count {
            // The last bytes, zero-padded to a whole 128-byte block (the length is mixed in below).
            var rest = (SIMD8<UInt64>(), SIMD8<UInt64>())
            withUnsafeMutableBytes(of: &rest) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset...])) }
            withUnsafeBytes(of: &rest) { padded in
                a0 &+= load(padded.baseAddress!)
                b0 &+= a0
                a1 &+= load(padded.baseAddress! + 64)
                b1 &+= a1
            }
        }
        var h = UInt64(count) &* 0x9E37_79B1_85EB_CA87
        for lane in 0..<8 {
            h = mix(h, a0[lane])
            h = mix(h, b0[lane])
            h = mix(h, a1[lane])
            h = mix(h, b1[lane])
        }
        return h ^ (h >> 32)
    }

    @inline(__always) private static func load(_ p: UnsafeRawPointer) -> SIMD8<UInt64> {
        var words = p.loadUnaligned(as: SIMD8<UInt64>.self)
        #if _endian(big)
        for i in 0..<8 { words[i] = words[i].byteSwapped }
        #endif
        return words
    }

    /// One word into the running value: multiply, rotate, multiply (as in XXH64's rounds).
    @inline(__always) private static func mix(_ h: UInt64, _ word: UInt64) -> UInt64 {
        var x = (h ^ word) &* 0xC2B2_AE3D_27D4_EB4F
        x = (x << 31) | (x >> 33)
        return x &* 0x9E37_79B1_85EB_CA87
    }
}
