import Foundation

/// Storing and combining parts of a representation (RFC 9111 sections 3.3 and 3.4, RFC 9110
/// section 15.3.7.3): pure functions of a 206, its content and the stored entry.
enum PartialEntries {
    /// Why a 206 cannot be stored as a part, or nil: it must carry one byte range with a
    /// known complete length, a `Content-Length` (if any) of that range's length, and no
    /// content coding (its offsets would be the coding's, which the network layer may have
    /// undone).
    static func reasonNotToStore(_ head: ResponseHead, range: ContentRange?) -> NotStoredReason? {
        guard let field = head.header("Content-Range") else { return .unusablePart("it has no Content-Range") }
        guard let range else { return .unusablePart("its Content-Range (\(field.prefix(80))) is not one byte range") }
        guard range.completeLength != nil else { return .unusablePart("its Content-Range does not give the complete length") }
        // A valid length, or digits past `Int.max`, that is not the range's: known from the
        // head, so its Cache-Status never says `stored` for content that cannot be.
        if let field = head.header("Content-Length"), head.contentLength.map({ $0 != range.count })
            ?? (!field.isEmpty && field.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }) {
            return .unusablePart("its Content-Length (\(field.prefix(20))) is not the \(range.count) bytes its Content-Range covers")
        }
        if let coding = contentCoding(head.header("Content-Encoding")) {
            return .unusablePart("it is content-coded (\(coding.prefix(40)))")
        }
        return nil
    }

    /// The content coding a `Content-Encoding` field names, nil for none or `identity`.
    static func contentCoding(_ field: String?) -> String? {
        guard let coding = field?.trimmingCharacters(in: .whitespaces), !coding.isEmpty,
              coding.lowercased() != "identity" else { return nil }
        return coding
    }

    /// Fields that describe one part, not the representation: never kept with a partial entry.
    static let partFields = ["Content-Range", "Content-Length"]

    /// What storing a part makes.
    enum Combination: Equatable {
        /// The entry to store: partial (status 206), or whole (200) once it holds every byte.
        case entry(CacheEntry, combined: Bool)
        /// It would hold more spans than the configuration allows.
        case tooManySpans
    }

    /// The entry a part makes: `part` (the 206 as received, its content whole, made by the
    /// transaction) alone, or combined with `previous` when both share a strong validator and
    /// the complete length. Combined, its fields are the stored ones updated with the part's
    /// (RFC 9111 section 3.2), its age starts again, and the part's bytes win where they
    /// overlap. It is whole (status 200, `Content-Length` the complete length) when it holds
    /// every byte.
    static func combine(part: CacheEntry, range: ContentRange, head: ResponseHead, previous: CacheEntry?,
                        keepingCookies: Bool, maxSpans: Int, now: Date) -> Combination {
        let length = range.completeLength ?? 0
        var base = part
        var segments: [PartialContent.Segment] = []
        if let previous, let held = heldSegments(of: previous, completeLength: length),
           Validation.shareStrongValidator(previous.header, head.header, now: now) {
            base = Validation.merge(previous, notModified: head, keepingCookies: keepingCookies, now: now)
            base.key = part.key
            base.url = part.url
            base.varyValues = part.varyValues
            base.windows = part.windows ?? previous.windows
            segments = held
        }
        segments.append(PartialContent.Segment(span: range.span, bytes: part.body))
        let (spans, body) = PartialContent.union(segments)
        var entry = base
        entry.body = body
        entry.headers = entry.headers.filter { name, _ in !partFields.contains { $0.equalsIgnoringASCIICase(name) } }
        if spans == [0..<length] {
            entry.statusCode = 200
            entry.partialContent = nil
            entry.headers["Content-Length"] = String(length)
        } else {
            guard spans.count <= max(1, maxSpans) else { return .tooManySpans }
            guard let parts = PartialContent(completeLength: length, spans: spans) else { return .tooManySpans }
            entry.statusCode = 206
            entry.partialContent = parts
        }
        return .entry(entry, combined: segments.count > 1)
    }

    /// The bytes a stored entry holds of a representation of `completeLength` bytes, as
    /// segments: a consistent partial entry's spans, or a whole 200's body of that length; nil
    /// for anything else (another length is another representation).
    static func heldSegments(of entry: CacheEntry, completeLength: Int) -> [PartialContent.Segment]? {
        if let parts = entry.partialContent {
            guard entry.isConsistentPartial, parts.completeLength == completeLength else { return nil }
            return parts.segments(of: entry.body)
        }
        guard entry.statusCode == 200, entry.body.count == completeLength else { return nil }
        return [PartialContent.Segment(span: 0..<completeLength, bytes: entry.body)]
    }
}

extension CacheEntry {
    /// Whether its body is content-coded: the bytes stored are the ones the network layer
    /// decoded, so neither byte ranges nor the coded length can be taken from them.
    var isContentCoded: Bool { PartialEntries.contentCoding(header("Content-Encoding")) != nil }
}
