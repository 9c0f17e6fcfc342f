/// SHA-256 (FIPS 180-4), small and dependency-free: names disk entries after their keys and
/// partitions entries by credentials without storing the credentials themselves.
struct SHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    /// The 32-byte digest of `bytes`.
    static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
            (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
        let digest: [UInt8] = withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { tail in
                let run = { (input: UnsafeBufferPointer<UInt8>) in
                    // Whole blocks straight from the input; the rest, with padding, from `tail`.
                    var offset = 0
                    while offset + 64 <= input.count {
                        compress(UnsafeRawPointer(input.baseAddress! + offset), w, &h)
                        offset += 64
                    }
                    let rest = input.count - offset
                    for i in 0..<rest { tail[i] = input[offset + i] }
                    tail[rest] = 0x80
                    let blocks = rest < 56 ? 1 : 2
                    for i in (rest + 1)..<(blocks * 64) { tail[i] = 0 }
                    let bitLength = UInt64(input.count) &* 8
                    for i in 0..<8 { tail[blocks * 64 - 1 - i] = UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i))) }
                    for block in 0..<blocks { compress(UnsafeRawPointer(tail.baseAddress! + block * 64), w, &h) }
                }
                if bytes.withContiguousStorageIfAvailable(run) == nil { Array(bytes).withUnsafeBufferPointer(run) }
                var out = [UInt8]()
                out.reserveCapacity(32)
                for word in [h.0, h.1, h.2, h.3, h.4, h.5, h.6, h.7] {
                    out.append(UInt8(word >> 24)); out.append(UInt8(truncatingIfNeeded: word >> 16))
                    out.append(UInt8(truncatingIfNeeded: word >> 8)); out.append(UInt8(truncatingIfNeeded: word))
                }
                return out
            }
        }
        return digest
    }

    /// One 64-byte block into the state.
    private static func compress(_ block: UnsafeRawPointer, _ w: UnsafeMutableBufferPointer<UInt32>,
                                 _ h: inout (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)) {
        for i in 0..<16 { w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var a = h.0, b = h.1, c = h.2, d = h.3, e = h.4, f = h.5, g = h.6, hh = h.7
        k.withUnsafeBufferPointer { k in
            for i in 0..<64 {
                let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                let choice = (e & f) ^ (~e & g)
                let t1 = hh &+ s1 &+ choice &+ k[i] &+ w[i]
                let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let t2 = s0 &+ majority
                hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
            }
        }
        h.0 &+= a; h.1 &+= b; h.2 &+= c; h.3 &+= d; h.4 &+= e; h.5 &+= f; h.6 &+= g; h.7 &+= hh
    }

    /// The digest as 64 lower-case hex digits.
    static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in hash(bytes) {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
}

/// A fast 64-bit checksum over whole words, to tell a damaged entry file from a good one.
/// Not cryptographic: it guards against corruption, not against an attacker.
enum Checksum64 {
    static func of(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        // Four independent lanes, so the multiplies do not wait on each other.
        var lanes: (UInt64, UInt64, UInt64, UInt64) = (0xcbf2_9ce4_8422_2325 ^ UInt64(buffer.count),
                                                       0x8422_2325_cbf2_9ce4, 0x9e37_79b9_7f4a_7c15, 0x6a09_e667_f3bc_c908)
        var offset = 0
        while offset + 32 <= buffer.count {
            lanes.0 = (lanes.0 ^ buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* prime
            lanes.1 = (lanes.1 ^ buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)) &* prime
            lanes.2 = (lanes.2 ^ buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)) &* prime
            lanes.3 = (lanes.3 ^ buffer.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)) &* prime
            lanes.0 ^= lanes.0 >> 29; lanes.1 ^= lanes.1 >> 29; lanes.2 ^= lanes.2 >> 29; lanes.3 ^= lanes.3 >> 29
            offset += 32
        }
        var hash = lanes.0 ^ (lanes.1 &* 3) ^ (lanes.2 &* 5) ^ (lanes.3 &* 7)
        while offset < buffer.count {
            hash = (hash ^ UInt64(buffer[offset])) &* prime
            offset += 1
        }
        return hash ^ (hash >> 32)
    }
}
