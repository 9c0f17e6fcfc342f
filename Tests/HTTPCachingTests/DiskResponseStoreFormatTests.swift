import Foundation
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
@testable import store_stress_worker

/// The pseudo-random bytes of xxHash's sanity checks (xsum_sanity_check.c), which its
/// published vectors hash.
func xxhashSanityBuffer(_ count: Int) -> [UInt8] {
    var generator: UInt64 = 2_654_435_761
    return (0..<count).map { _ in
        defer { generator &*= 11_400_714_785_074_694_797 }
        return UInt8(generator >> 56)
    }
}

@Suite("Hashes")
struct HashTests {
    @Test("XXH64 matches the published vectors", arguments: [
        ("", 0xEF46_DB37_51D8_E999), ("a", 0xD24E_C4F1_A98C_6E5B), ("abc", 0x44BC_2CF5_AD77_0999),
        ("message digest", 0x066E_D728_FCEE_B3BE), ("abcdefghijklmnopqrstuvwxyz", 0xCFE1_F278_FA89_835C),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 0xAAA4_6907_D304_7814),
        (String(repeating: "1234567890", count: 8), 0xE04A_477F_19EE_145D),
        ("Nobody inspects the spammish repetition", 0xFBCE_A83C_8A37_8BF1),
    ] as [(String, UInt64)])
    func xxh64(input: String, digest: UInt64) {
        #expect(XXH64.hash(Array(input.utf8)) == digest)
    }

    @Test("XXH64 matches the sanity-check vectors, seeded and not", arguments: [
        (0, 0, 0xEF46_DB37_51D8_E999), (0, 2_654_435_761, 0xAC75_FDA2_929B_17EF), (1, 0, 0xE934_A84A_DB05_2768),
        (1, 2_654_435_761, 0x5014_6076_43A9_B4C3), (4, 0, 0x9136_A0DC_A574_57EE), (14, 0, 0x8282_DCC4_994E_35C8),
        (14, 2_654_435_761, 0xC3BD_6BF6_3DEB_6DF0), (222, 0, 0xB641_AE8C_B691_C174), (222, 2_654_435_761, 0x20CB_8AB7_AE10_C14A),
    ] as [(Int, UInt64, UInt64)])
    func xxh64Sanity(length: Int, seed: UInt64, digest: UInt64) {
        #expect(XXH64.hash(xxhashSanityBuffer(length), seed: seed) == digest)
    }

    @Test("XXH3-64 matches the sanity-check vectors at every length class", arguments: [
        (0, 0x2D06_8005_38D3_94C2), (1, 0xC44B_DFF4_074E_ECDB), (6, 0x27B5_6A84_CD2D_7325), (12, 0xA713_DAF0_DFBB_77E7),
        (24, 0xA3FE_70BF_9D35_10EB), (48, 0x397D_A259_ECBA_1F11), (80, 0xBCDE_FBBB_2C47_C90A), (195, 0xCD94_217E_E362_EC3A),
        (403, 0xCDEB_804D_65C6_DEA4), (512, 0x617E_4959_9013_CB6B), (2048, 0xDD59_E2C3_A5F0_38E0), (2099, 0xC6B9_D9B3_FC9A_C765),
        (2240, 0x6E73_A905_39CF_2948), (2367, 0xCB37_AEB9_E5D3_61ED),
    ] as [(Int, UInt64)])
    func xxh3(length: Int, digest: UInt64) {
        #expect(XXH3.hash(xxhashSanityBuffer(length)) == digest)
    }

    @Test("HMAC-SHA-256 matches RFC 4231", arguments: [
        ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        (Array(1...25), [UInt8](repeating: 0xcd, count: 50),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        ([UInt8](repeating: 0x0c, count: 20), Array("Test With Truncation".utf8),
         "a3b6167473100ee06e0c796c2955552b"), // test case 5: the first 128 bits
        ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        ([UInt8](repeating: 0xaa, count: 131),
         Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ] as [([UInt8], [UInt8], String)])
    func hmac(key: [UInt8], message: [UInt8], code: String) {
        let hex = HMACSHA256.authenticationCode(key: key, message: message).map { String(format: "%02x", $0) }.joined()
        #expect(hex.hasPrefix(code) && hex.count == 64)
    }
}

@Suite("Entry file format")
struct EntryFileFormatTests {
    typealias E = StoreConformance

    static func keys() -> [CacheKey] {
        var keys = [CacheKey(url: URL(string: "http://example.test/a?b=c")!)]
        var key = keys[0]
        key.method = "HEAD"; keys.append(key)
        key.partition = CredentialPartition(rawValue: "00112233445566778899aabbccddeeff"); keys.append(key)
        key.variant = "accept-language=en"; keys.append(key)
        key.namespace = "ns with spaces %41 and ünïcødé"; keys.append(key)
        keys.append(CacheKey(method: "GET", normalizedURL: "http://h/\u{0}\n\r %zz", variant: "v\n", namespace: "1:2"))
        keys.append(CacheKey(method: "M", normalizedURL: String(repeating: "x", count: 12_345)))
        return keys
    }

    @Test("every field survives encoding, the body first and not copied")
    func roundTrip() throws {
        for key in Self.keys() {
            let entry = CacheEntry(key: key, url: URL(string: "https://example.test/redirected")!, statusCode: 299,
                                   headers: ["ETag": "\"x\"", "X-Ünïcødé": "välue", "Empty": ""],
                                   body: Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) }),
                                   storedAt: Date(timeIntervalSinceReferenceDate: 123_456.789_012_345),
                                   windows: .test(fresh: 1.5, usable: 1e9), varyValues: ["accept": "*/*", "x": ""],
                                   generation: 0xDEAD_BEEF_0000_0001, usefulUntil: Date(timeIntervalSince1970: 2e9))
            let encoded = EntryFileFormat.encode(entry)
            let decoded = try EntryFileFormat.decode(encoded, expecting: key)
            #expect(decoded == entry)
            #expect(try EntryFileFormat.decode(encoded) == entry, "without an expected key, the stored one")
            #expect(decoded.body.startIndex == 0)
            #expect(encoded.prefix(entry.body.count) == entry.body, "the body comes first")
        }
    }

    @Test("every URL a request can carry survives encoding exactly; a URL field a URL may not hold is malformed, not escaped")
    func urlField() throws {
        let made = ["http://example.test/a b?c=d e#f g", "http://u:p%40@[::1]:8080/x/../y?%zz", "http://bücher.test/ünï?q=ü",
                    "https://h/a|b^c\\d{e}[f]`g", "http://h/%E2%82%AC;p=1?a=1&a=2", "http://h"].compactMap { URL(string: $0) }
            + [URL(fileURLWithPath: "/tmp/a b/c"), URL(string: "/rel", relativeTo: URL(string: "http://h/base/"))!]
        #expect(made.count == 8)
        for url in made {
            let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data("b".utf8),
                                   storedAt: E.base, windows: .test(fresh: 1, usable: 2))
            let decoded = try EntryFileFormat.decode(EntryFileFormat.encode(entry))
            #expect(decoded.url.absoluteString == url.absoluteString)
            #expect(EntryFileFormat.encode(decoded) == EntryFileFormat.encode(entry))
        }
        // The same entry with its URL field's bytes changed to a space, resealed: rejected.
        let url = URL(string: "http://h/ab")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: [:], body: Data(),
                               storedAt: E.base, windows: .test(fresh: 1, usable: 2))
        var bytes = Array(EntryFileFormat.encode(entry))
        let field = try #require(bytes.indices.last { bytes[$0...].starts(with: Array("http://h/ab".utf8)) })
        bytes[field + 9] = UInt8(ascii: " ")
        #expect(throws: EntryFileFormat.DecodeError.malformed("URL")) {
            try EntryFileFormat.decode(Data(DiskStoreFuzzTests.resealed(bytes, bodyLength: 0)))
        }
    }

    @Test("the storage bytes the store hashes are exactly CacheKey.storageString, and parse back to the key")
    func storageBytes() {
        for key in Self.keys() {
            let bytes = EntryName.storageBytes(of: key)
            #expect(bytes == Array(key.storageString.utf8))
            #expect(bytes.withUnsafeBytes { Journal.storageKey($0) } == CacheKey(storageString: key.storageString))
            #expect(EntryName(key).hex.count == 32)
        }
    }

    @Test("an older version is reported as such; bytes of another key as a typed mismatch")
    func typedErrors() throws {
        let entry = E.entry("/a")
        #expect(throws: EntryFileFormat.DecodeError.unsupportedVersion(2)) {
            try EntryFileFormat.decode(Data("HTCE\u{2}\u{0}".utf8) + Data(count: 60))
        }
        #expect(throws: EntryFileFormat.DecodeError.keyMismatch) {
            try EntryFileFormat.decode(EntryFileFormat.encode(entry), expecting: E.entry("/b").key)
        }
        #expect(throws: EntryFileFormat.DecodeError.truncated) { try EntryFileFormat.decode(Data()) }
    }
}

/// The body checksum: every kind of damage a file meets changes it.
@Suite("Body checksum")
struct BodyChecksumTests {
    static func bytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
    }

    static func checksum(_ bytes: [UInt8]) -> UInt64 { bytes.withUnsafeBytes { BodyChecksum.checksum($0) } }

    @Test("every single bit flipped changes it, at every length class", arguments: [0, 1, 7, 8, 63, 64, 127, 128, 129, 1000, 4096])
    func bitFlips(length: Int) {
        let original = Self.bytes(length)
        let reference = Self.checksum(original)
        var changed = 0
        for index in 0..<length {
            for bit in [0, 3, 7] {
                var damaged = original
                damaged[index] ^= 1 << bit
                if Self.checksum(damaged) != reference { changed += 1 }
            }
        }
        #expect(changed == length * 3)
    }

    @Test("zeroed runs, swapped blocks, swapped words across lanes, appended zeros and cuts all change it")
    func structuralDamage() {
        let original = Self.bytes(64 * 1024, seed: 7)
        let reference = Self.checksum(original)
        var zeroed = original
        zeroed.replaceSubrange(8192..<12288, with: repeatElement(0, count: 4096))
        var swappedBlocks = original
        swappedBlocks.replaceSubrange(0..<128, with: original[1024..<1152])
        swappedBlocks.replaceSubrange(1024..<1152, with: original[0..<128])
        var swappedStripes = original // stripes 0 and 1: the two halves of one block
        swappedStripes.replaceSubrange(0..<64, with: original[64..<128])
        swappedStripes.replaceSubrange(64..<128, with: original[0..<64])
        var swappedWords = original // two words of one stripe: two lanes
        swappedWords.replaceSubrange(0..<8, with: original[8..<16])
        swappedWords.replaceSubrange(8..<16, with: original[0..<8])
        let variants = [zeroed, swappedBlocks, swappedStripes, swappedWords, original + [0], original + [UInt8](repeating: 0, count: 128),
                        Array(original.dropLast()), Array(original.dropLast(128)), Array(original.dropFirst(128))]
        for (index, variant) in variants.enumerated() {
            #expect(Self.checksum(variant) != reference, "variant \(index)")
        }
        // Different inputs of one length spread over the 64 bits, like a hash's would.
        let sums = (0..<2000).map { Self.checksum(Self.bytes(100, seed: UInt64($0) + 100)) }
        #expect(Set(sums).count == sums.count)
        #expect(Set(sums.map { $0 >> 60 }).count == 16 && Set(sums.map { $0 & 15 }).count == 16)
    }
}
