/// HMAC-SHA-256 (RFC 2104 with FIPS 180-4 SHA-256): keys credential partitions with a
/// store's secret, so the credentials cannot be recovered from a key.
enum HMACSHA256 {
    /// The 32-byte authentication code of `message` under `key` (any length; a key longer
    /// than the 64-byte block is hashed first).
    static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        let inner = SHA256.hash(block.map { $0 ^ 0x36 } + message)
        return SHA256.hash(block.map { $0 ^ 0x5c } + inner)
    }
}
