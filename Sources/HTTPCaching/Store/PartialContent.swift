import Foundation

/// What a partial entry holds of a representation (RFC 9111 section 3.3): its complete length
/// and the byte spans its body holds, one after another, in order.
///
/// A partial entry is stored from `206 (Partial Content)` answers when
/// `CacheConfiguration.storesPartialContent` is on. Its `CacheEntry.statusCode` is 206 and its
/// `CacheEntry.body` is the bytes of `spans`, concatenated. The spans are sorted, non-empty,
/// neither overlapping nor touching (touching spans are one span), within the complete length,
/// and never all of it: a representation held whole is a 200 entry.
public struct PartialContent: Sendable, Hashable {
    /// The length of the whole representation, in bytes.
    public let completeLength: Int
    /// The spans held, as byte offsets into the representation (upper bound excluded), in order.
    public let spans: [Range<Int>]

    /// The spans held of a representation of `completeLength` bytes.
    ///
    /// Nil unless there is at least one span, each is non-empty and within `0..<completeLength`,
    /// they are sorted with a gap between each two, and they leave at least one byte out.
    public init?(completeLength: Int, spans: [Range<Int>]) {
        guard completeLength > 0, let first = spans.first, first.lowerBound >= 0 else { return nil }
        var previousEnd = -1
        var held = 0
        for span in spans {
            guard !span.isEmpty, span.lowerBound > previousEnd, span.upperBound <= completeLength else { return nil }
            previousEnd = span.upperBound
            held += span.count
        }
        guard held < completeLength else { return nil }
        self.completeLength = completeLength
        self.spans = spans
    }

    /// The bytes held: the length the entry's body must have.
    public var storedBytes: Int { spans.reduce(0) { $0 + $1.count } }

    /// Whether every byte of `bytes` is held.
    func covers(_ bytes: ClosedRange<Int>) -> Bool {
        bodyRange(of: bytes) != nil
    }

    /// Where `bytes` lie in the body, when every one of them is held (they are then in one span).
    func bodyRange(of bytes: ClosedRange<Int>) -> Range<Int>? {
        var offset = 0
        for span in spans {
            if span.contains(bytes.lowerBound) {
                guard bytes.upperBound < span.upperBound else { return nil }
                let start = offset + bytes.lowerBound - span.lowerBound
                return start..<(start + bytes.count)
            }
            offset += span.count
        }
        return nil
    }

    /// The bytes not held, in order.
    var gaps: [Range<Int>] {
        var gaps: [Range<Int>] = []
        var position = 0
        for span in spans {
            if span.lowerBound > position { gaps.append(position..<span.lowerBound) }
            position = span.upperBound
        }
        if position < completeLength { gaps.append(position..<completeLength) }
        return gaps
    }

    /// Each span held, with its bytes out of `body` (the entry's body, `storedBytes` long).
    func segments(of body: Data) -> [Segment] {
        var offset = body.startIndex
        return spans.map { span in
            defer { offset += span.count }
            return Segment(span: span, bytes: body[offset..<(offset + span.count)])
        }
    }

    /// Bytes of a representation at a place in it: a span held, or the content of a 206.
    struct Segment: Equatable {
        var span: Range<Int>
        var bytes: Data
    }

    /// The union of `segments` (each `bytes.count == span.count`): the merged spans, sorted, and
    /// the body that holds them, where a later segment's bytes replace an earlier one's.
    static func union(_ segments: [Segment]) -> (spans: [Range<Int>], body: Data) {
        var merged: [Range<Int>] = []
        for span in segments.map(\.span).filter({ !$0.isEmpty }).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, span.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, span.upperBound)
            } else {
                merged.append(span)
            }
        }
        var body = Data(capacity: merged.reduce(0) { $0 + $1.count })
        for span in merged {
            var buffer = Data(count: span.count)
            for segment in segments where segment.span.overlaps(span) {
                let start = max(segment.span.lowerBound, span.lowerBound), end = min(segment.span.upperBound, span.upperBound)
                let from = segment.bytes.startIndex + (start - segment.span.lowerBound)
                buffer.replaceSubrange((start - span.lowerBound)..<(end - span.lowerBound),
                                       with: segment.bytes[from..<(from + end - start)])
            }
            body.append(buffer)
        }
        return (merged, body)
    }
}
