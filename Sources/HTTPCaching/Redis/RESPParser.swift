/// Reads RESP2 replies from bytes that arrive in pieces of any size.
///
/// Append what the socket gave, then take whole replies with `next()` until it answers nil
/// (more bytes needed). Every length read from the wire is checked against `Limits` before
/// anything is allocated for it, and the bytes held for one unfinished reply are bounded, so
/// a hostile or broken peer gets a `ProtocolError`, never a crash, a huge allocation or an
/// endless wait on bytes that cannot make a valid reply. After an error the parser stays
/// failed: the connection it reads for must be closed.
struct RESPParser {
    /// Bounds on what one reply may hold.
    struct Limits: Sendable, Equatable {
        /// The longest bulk string. The default is 512 MiB (Redis's own `proto-max-bulk-len`).
        var maxBulkLength = 512 << 20
        /// The most elements in one array. The default is 1,048,576.
        var maxArrayCount = 1 << 20
        /// The deepest nesting of arrays. The default is 8.
        var maxDepth = 8
        /// The longest status, error or integer line. The default is 64 KiB.
        var maxLineLength = 64 << 10
        /// The most bytes one unfinished reply may hold. The default is 600 MiB.
        var maxReplyBytes = 600 << 20
    }

    /// Bytes that cannot be (the start of) a valid reply.
    struct ProtocolError: Error, Equatable, CustomStringConvertible {
        /// What was wrong, with the offset in the reply.
        let description: String
        /// Whether the bytes were well formed but over a limit (a value too large to take).
        var isOverLimit = false
    }

    let limits: Limits
    private var buffer: [UInt8] = []
    /// Where the next reply starts in `buffer`.
    private var start = 0
    /// How many bytes from `start` the unfinished reply needs at least; no parse is tried
    /// before they are there, so a large bulk string arriving in many pieces is not re-read
    /// from its start for every piece.
    private var needed = 1
    private var failure: ProtocolError?

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet taken as replies.
    var bufferedByteCount: Int { buffer.count - start }

    /// Adds bytes read from the connection.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Adds bytes read from the connection.
    mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The next whole reply, or nil until more bytes arrive.
    /// - Throws: `ProtocolError` for bytes that cannot make a valid reply, and again on every
    ///   later call.
    mutating func next() throws(ProtocolError) -> RESPValue? {
        if let failure { throw failure }
        guard bufferedByteCount >= needed else { return nil }
        do throws(ProtocolError) {
            var index = start
            var minimum = 0
            guard let value = try parse(at: &index, depth: 0, minimum: &minimum) else {
                needed = max(minimum - start, bufferedByteCount + 1)
                if bufferedByteCount > limits.maxReplyBytes {
                    throw ProtocolError(description: "a reply longer than \(limits.maxReplyBytes) bytes", isOverLimit: true)
                }
                return nil
            }
            start = index
            needed = 1
            return value
        } catch {
            failure = error
            throw error
        }
    }

    // MARK: - Parsing

    /// One value starting at `index`, moving `index` past it; nil if the buffer ends first,
    /// with `minimum` set to the buffer length a retry needs at least.
    private func parse(at index: inout Int, depth: Int, minimum: inout Int) throws(ProtocolError) -> RESPValue? {
        guard index < buffer.count else {
            minimum = index + 1
            return nil
        }
        let type = buffer[index]
        let offset = index - start
        var cursor = index + 1
        guard let line = try line(at: &cursor, minimum: &minimum) else { return nil }
        switch type {
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let text = String(validating: buffer[line], as: UTF8.self) else {
                throw ProtocolError(description: "a status line that is not UTF-8 at byte \(offset)")
            }
            index = cursor
            return type == UInt8(ascii: "+") ? .simpleString(text) : .error(text)
        case UInt8(ascii: ":"):
            index = cursor
            return .integer(try integer(line, offset: offset))
        case UInt8(ascii: "$"):
            return try bulkString(length: try integer(line, offset: offset), at: cursor, offset: offset,
                                  index: &index, minimum: &minimum)
        case UInt8(ascii: "*"):
            return try array(count: try integer(line, offset: offset), at: cursor, depth: depth, offset: offset,
                             index: &index, minimum: &minimum)
        default:
            throw ProtocolError(description: "an unknown reply type byte \(type) at byte \(offset)")
        }
    }

    /// The bulk string of `length` bytes whose data starts at `cursor` (after its length
    /// line), moving `index` past it; nil if the buffer ends first, with `minimum` set.
    private func bulkString(length: Int64, at cursor: Int, offset: Int,
                            index: inout Int, minimum: inout Int) throws(ProtocolError) -> RESPValue? {
        if length == -1 {
            index = cursor
            return .bulkString(nil)
        }
        guard length >= 0 else { throw ProtocolError(description: "a negative bulk length \(length) at byte \(offset)") }
        guard length <= limits.maxBulkLength else {
            throw ProtocolError(description: "a bulk string of \(length) bytes, over the limit of \(limits.maxBulkLength), at byte \(offset)",
                                isOverLimit: true)
        }
        let count = Int(length)
        let end = cursor + count
        guard buffer.count >= end + 2 else {
            minimum = end + 2
            return nil
        }
        guard buffer[end] == 13, buffer[end + 1] == 10 else {
            throw ProtocolError(description: "a bulk string of \(count) bytes not followed by CRLF at byte \(offset)")
        }
        index = end + 2
        return .bulkString(Array(buffer[cursor..<end]))
    }

    /// The array of `count` elements whose first starts at `first` (after its count line),
    /// moving `index` past it; nil if the buffer ends first, with `minimum` set.
    private func array(count: Int64, at first: Int, depth: Int, offset: Int,
                       index: inout Int, minimum: inout Int) throws(ProtocolError) -> RESPValue? {
        if count == -1 {
            index = first
            return .array(nil)
        }
        guard count >= 0 else { throw ProtocolError(description: "a negative array count \(count) at byte \(offset)") }
        guard count <= limits.maxArrayCount else {
            throw ProtocolError(description: "an array of \(count) elements, over the limit of \(limits.maxArrayCount), at byte \(offset)",
                                isOverLimit: true)
        }
        guard depth < limits.maxDepth else {
            throw ProtocolError(description: "arrays nested deeper than \(limits.maxDepth) at byte \(offset)")
        }
        var cursor = first
        var elements: [RESPValue] = []
        // Each element takes at least 3 bytes, so what is buffered bounds the reservation.
        elements.reserveCapacity(min(Int(count), (buffer.count - cursor) / 3))
        for _ in 0..<count {
            guard let element = try parse(at: &cursor, depth: depth + 1, minimum: &minimum) else { return nil }
            elements.append(element)
        }
        index = cursor
        return .array(elements)
    }

    /// The range of the line starting at `cursor` (without its CRLF), moving `cursor` past
    /// the CRLF; nil if the line is not complete yet.
    private func line(at cursor: inout Int, minimum: inout Int) throws(ProtocolError) -> Range<Int>? {
        let first = cursor
        let limit = min(buffer.count, first + limits.maxLineLength + 1)
        var index = first
        while index < limit {
            switch buffer[index] {
            case 13:
                guard index + 1 < buffer.count else {
                    minimum = index + 2
                    return nil
                }
                guard buffer[index + 1] == 10 else {
                    throw ProtocolError(description: "a CR not followed by LF at byte \(index - start)")
                }
                cursor = index + 2
                return first..<index
            case 10:
                throw ProtocolError(description: "a bare LF at byte \(index - start)")
            default:
                index += 1
            }
        }
        guard index - first <= limits.maxLineLength else {
            throw ProtocolError(description: "a line longer than \(limits.maxLineLength) bytes at byte \(first - start)")
        }
        minimum = buffer.count + 1
        return nil
    }

    /// A decimal integer line: an optional minus sign and 1 to 19 digits, nothing else.
    private func integer(_ line: Range<Int>, offset: Int) throws(ProtocolError) -> Int64 {
        var index = line.lowerBound
        let negative = index < line.upperBound && buffer[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < line.upperBound, line.upperBound - index <= 19 else {
            throw ProtocolError(description: "an invalid integer at byte \(offset)")
        }
        var value: Int64 = 0
        while index < line.upperBound {
            let byte = buffer[index]
            guard byte >= 48, byte <= 57 else { throw ProtocolError(description: "an invalid integer at byte \(offset)") }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (added, overflow2) = shifted.addingReportingOverflow(Int64(byte - 48))
            guard !overflow1, !overflow2 else { throw ProtocolError(description: "an integer out of range at byte \(offset)") }
            value = added
            index += 1
        }
        return negative ? -value : value
    }

    /// Drops the bytes of replies already taken once they are a large share of the buffer.
    private mutating func compact() {
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 20)
            start = 0
        } else if start > 64 << 10, start > buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}
