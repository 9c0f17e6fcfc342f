import Foundation

/// A single `bytes=` range request (RFC 9110 section 14.1.2), answered from a stored complete
/// response.
enum ByteRange: Sendable, Equatable {
    /// Bytes `first...last` (inclusive) of the body.
    case satisfiable(ClosedRange<Int>)
    /// No byte of the range exists in the body: answered 416.
    case unsatisfiable
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
            guard suffix > 0, length > 0 else { return .unsatisfiable }
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
