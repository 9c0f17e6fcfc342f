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
