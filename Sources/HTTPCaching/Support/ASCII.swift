extension String {
    /// Whether two header names are equal ignoring ASCII case (header names are ASCII), without
    /// Foundation's locale-aware comparison, which is slow on a request's path.
    func equalsIgnoringASCIICase(_ other: String) -> Bool {
        var a = utf8.makeIterator(), b = other.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x != y && (x | 0x20) != (y | 0x20) { return false }
                if x != y && !((x | 0x20) >= 97 && (x | 0x20) <= 122) { return false }
            default: return false
            }
        }
    }
}

/// Bytes as lower-case hexadecimal digits, two per byte.
func hexString<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
