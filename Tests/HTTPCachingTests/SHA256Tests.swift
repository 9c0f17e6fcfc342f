import Testing
@testable import HTTPCaching

@Suite("SHA-256")
struct SHA256Tests {
    @Test("matches the FIPS 180-4 test vectors", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        (String(repeating: "a", count: 1000), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ])
    func vectors(input: String, digest: String) {
        #expect(SHA256.hex(Array(input.utf8)) == digest)
        #expect(SHA256.hex(input.utf8) == digest, "non-contiguous input too")
    }

    @Test("contiguous and non-contiguous input give the same digest at every padding boundary")
    func boundaries() {
        // Lengths 55, 56, 63, 64, 65, ... cross the one- and two-block padding cases; the
        // vectors above pin the digests themselves.
        for length in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37) }
            #expect(SHA256.hash(bytes) == SHA256.hash(bytes.lazy.map { $0 }), "length \(length)")
            #expect(SHA256.hash(bytes).count == 32)
        }
    }
}
