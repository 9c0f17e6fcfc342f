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
        var running = Running()
        running.update(buffer)
        return running.finish()
    }

    /// The checksum of a body that arrives in parts: the same value as `checksum` of all of
    /// it, whatever the parts' sizes. Whole 128-byte blocks are summed as they come; a part's
    /// last bytes wait in `pending` for the next part.
    struct Running {
        private var a0 = SIMD8<UInt64>(), b0 = SIMD8<UInt64>(), a1 = SIMD8<UInt64>(), b1 = SIMD8<UInt64>()
        private var count = 0
        private var pending = (SIMD8<UInt64>(), SIMD8<UInt64>())
        private var pendingCount = 0

        /// Adds the next bytes of the body.
        mutating func update(_ buffer: UnsafeRawBufferPointer) {
            guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
            count += buffer.count
            var offset = 0
            if pendingCount > 0 {
                let taken = min(128 - pendingCount, buffer.count)
                let start = pendingCount
                withUnsafeMutableBytes(of: &pending) { ($0.baseAddress! + start).copyMemory(from: base, byteCount: taken) }
                pendingCount += taken
                offset = taken
                guard pendingCount == 128 else { return }
                withUnsafeBytes(of: pending) { block(at: $0.baseAddress!) }
                pendingCount = 0
            }
            while offset + 128 <= buffer.count {
                block(at: base + offset)
                offset += 128
            }
            if offset < buffer.count {
                pending = (SIMD8<UInt64>(), SIMD8<UInt64>())
                pendingCount = buffer.count - offset
                let rest = pendingCount
                withUnsafeMutableBytes(of: &pending) { $0.baseAddress!.copyMemory(from: base + offset, byteCount: rest) }
            }
        }

        @inline(__always) private mutating func block(at p: UnsafeRawPointer) {
            a0 &+= load(p)
            b0 &+= a0
            a1 &+= load(p + 64)
            b1 &+= a1
        }

        /// The checksum of every byte added.
        func finish() -> UInt64 {
            var last = self
            if pendingCount > 0 {
                // The last bytes, zero-padded to a whole 128-byte block (the length is mixed in below).
                var padded = pending
                withUnsafeMutableBytes(of: &padded) { bytes in
                    for index in pendingCount..<128 { bytes[index] = 0 }
                }
                withUnsafeBytes(of: padded) { last.block(at: $0.baseAddress!) }
            }
            var h = UInt64(count) &* 0x9E37_79B1_85EB_CA87
            for lane in 0..<8 {
                h = mix(h, last.a0[lane])
                h = mix(h, last.b0[lane])
                h = mix(h, last.a1[lane])
                h = mix(h, last.b1[lane])
            }
            return h ^ (h >> 32)
        }
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
