import Foundation

/// A single `bytes=` range request (RFC 9110 section 14.1.2), answered from a stored complete
/// response.
enum ByteRange: Sendable, Equatable {
    /// Bytes `first...last` (inclusive) of the body.
    case satisfiable(ClosedRange<Int>)
    /// No byte of the range exists in the body: answered 416.
    case unsatisfiable
    /// A suffix range of a zero-length body: satisfiable (RFC 9110 section 14.1.2), but no
    /// 206 can describe zero bytes, so the whole (empty) body is answered, as a 200.
    case whole
    /// Several ranges, another unit, or a malformed field: left to the network untouched.
    case unsupported

    /// What a `Range` field asks of a body of `length` bytes.
    static func resolve(_ field: String, length: Int) -> ByteRange {
        let text = field.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), length >= 0 else { return .unsupported }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .unsupported }
        let first = spec[spec.startIndex..<dash], last = spec[spec.index(after: dash)...]
        func number(_ digits: Substring) -> Int? {
            guard !digits.isEmpty, digits.count <= 18, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return Int(digits)
        }
        if first.isEmpty {
            guard let suffix = number(last) else { return .unsupported }
            guard suffix > 0 else { return .unsatisfiable }
            guard length > 0 else { return .whole }
            return .satisfiable(max(0, length - suffix)...(length - 1))
        }
        guard let start = number(first) else { return .unsupported }
        let end: Int
        if last.isEmpty {
            end = length - 1
        } else {
            guard let value = number(last), value >= start else { return .unsupported }
            end = min(value, length - 1)
        }
        guard start < length else { return .unsatisfiable }
        return .satisfiable(start...end)
    }
}

/// A `Content-Range` field of a single-part 206 (RFC 9110 section 14.4):
/// `bytes first-last/complete-length`, or `bytes first-last/*` when the length is unknown.
struct ContentRange: Sendable, Equatable {
    /// The first byte's offset.
    var first: Int
    /// The last byte's offset (included).
    var last: Int
    /// The length of the whole representation; nil for `*`.
    var completeLength: Int?

    /// The bytes it covers, as a span of the representation.
    var span: Range<Int> { first..<(last + 1) }

    /// How many bytes it covers: what the 206's content must hold.
    var count: Int { last - first + 1 }

    /// The field parsed strictly: the `bytes` unit (case-insensitive), one space, decimal
    /// positions of at most 18 digits, `last >= first`, and a complete length above `last`.
    /// Nil for anything else: another unit, an unsatisfied range (`*/length`), a malformed or
    /// invalid value.
    init?(_ field: String?) {
        guard let field else { return nil }
        let text = field.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        guard text.utf8.count > 6, text.utf8.prefix(6).map({ $0 | 0x20 }).elementsEqual("bytes ".utf8) else { return nil }
        let rest = text.utf8.dropFirst(6)
        guard let dash = rest.firstIndex(of: UInt8(ascii: "-")), let slash = rest.firstIndex(of: UInt8(ascii: "/")),
              dash < slash else { return nil }
        func number(_ digits: Substring.UTF8View.SubSequence) -> Int? {
            guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
            return digits.reduce(0) { $0 * 10 + Int($1 - 48) }
        }
        guard let first = number(rest[rest.startIndex..<dash]),
              let last = number(rest[rest.index(after: dash)..<slash]), last >= first else { return nil }
        let length = rest[rest.index(after: slash)...]
        if length.elementsEqual("*".utf8) {
            completeLength = nil
        } else {
            guard let complete = number(length), complete > last else { return nil }
            completeLength = complete
        }
        self.first = first
        self.last = last
    }

    init(first: Int, last: Int, completeLength: Int?) {
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }
}
