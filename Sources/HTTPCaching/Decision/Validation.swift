import Foundation

/// Validating a stored entry with the origin (RFC 9110 section 13, RFC 9111 section 4.3).
enum Validation {
    static func hasValidator(_ entry: CacheEntry) -> Bool {
        entry.header("ETag") != nil || entry.header("Last-Modified") != nil
    }

    /// The fields that make a request conditional on a stored entry: `If-None-Match` with its
    /// ETag (weak or strong) and `If-Modified-Since` with its Last-Modified, when it has them.
    static func conditionalHeaders(for entry: CacheEntry) -> [String: String] {
        var fields: [String: String] = [:]
        if let etag = entry.header("ETag") { fields["If-None-Match"] = etag }
        if let lastModified = entry.header("Last-Modified") { fields["If-Modified-Since"] = lastModified }
        return fields
    }

    /// Whether a 304 selects the stored entry (RFC 9111 section 4.3.4): a strong ETag must
    /// equal the entry's strongly, a weak one weakly; without an ETag, a Last-Modified must
    /// equal the entry's; a 304 with neither selects the one entry there is. (It answers a
    /// request made conditional with that entry's own validators, and RFC 9110 section 15.4.5
    /// does not require a 304 to repeat `Last-Modified`. A 304 whose validator names another
    /// response selects nothing and updates nothing.)
    static func selects(_ notModified: ResponseHead, _ entry: CacheEntry) -> Bool {
        if let etag = notModified.header("ETag")?.trimmingCharacters(in: .whitespaces) {
            guard let stored = entry.header("ETag")?.trimmingCharacters(in: .whitespaces) else { return false }
            if etag.hasPrefix("W/") { return opaque(etag) == opaque(stored) }
            return !stored.hasPrefix("W/") && etag == stored
        }
        if let lastModified = notModified.header("Last-Modified") { return sameLastModified(lastModified, as: entry) }
        return true
    }

    /// Whether a `Last-Modified` value is a date equal to the entry's own.
    private static func sameLastModified(_ value: String, as entry: CacheEntry) -> Bool {
        guard let date = HTTPDate.parse(value, now: entry.storedAt) else { return false }
        return entry.header("Last-Modified").flatMap { HTTPDate.parse($0, now: entry.storedAt) } == date
    }

    /// Whether a 200 to a HEAD describes the stored GET response (RFC 9111 section 4.3.5):
    /// each validator it has (none is no mismatch) equals the entry's, and so does its
    /// `Content-Length` if it has one.
    static func headDescribes(_ head: ResponseHead, _ entry: CacheEntry) -> Bool {
        if let etag = head.header("ETag")?.trimmingCharacters(in: .whitespaces),
           etag != entry.header("ETag")?.trimmingCharacters(in: .whitespaces) { return false }
        if let lastModified = head.header("Last-Modified"), !sameLastModified(lastModified, as: entry) { return false }
        guard let length = head.contentLength else { return true }
        // The stored response's own length (a coded body is stored decoded), else its body's.
        let stored = HTTPFieldParsing.contentLength(entry.header("Content-Length")) ?? entry.body.count
        return entry.partialContent == nil && length == stored
    }

    /// An entity tag without its weakness mark, for weak comparison.
    static func opaque(_ etag: String) -> String {
        etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    }

    /// Fields a 304 must not change in the stored entry (RFC 9111 section 3.2): they describe
    /// the stored body, which the 304 does not replace.
    static let keptOnUpdate: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]

    /// Fields that date the stored response as it first arrived: after a 304 they are the
    /// 304's, or gone. (A stored `Age` the 304 does not repeat would make the entry as old
    /// again as it was when first stored; a stored `Date`, older than the 304.)
    static let datingFields = ["Age", "Date"]

    /// The stored entry updated by a selecting 304 (RFC 9111 section 4.3.4): the 304's fields
    /// replace the stored ones, but framing fields and fields that are never stored
    /// (`Set-Cookie` unless kept, hop-by-hop); `Age` and `Date` are the 304's or none; the
    /// body is kept; the age starts again.
    static func merge(_ entry: CacheEntry, notModified: ResponseHead, keepingCookies: Bool, now: Date) -> CacheEntry {
        var updated = entry
        for name in datingFields where notModified.header(name) == nil {
            updated.headers = updated.headers.filter { !$0.key.equalsIgnoringASCIICase(name) }
        }
        for (name, value) in Storability.storedHeaders(of: notModified, keepingCookies: keepingCookies)
        where !keptOnUpdate.contains(name.lowercased()) {
            if let existing = updated.headers.keys.first(where: { $0.equalsIgnoringASCIICase(name) }) {
                updated.headers[existing] = nil
            }
            updated.headers[name] = value
        }
        updated.storedAt = now
        updated.generation = CacheEntry.newGeneration()
        return updated
    }

    // MARK: - Strong validators (combining partial content)

    /// Whether two responses share a strong validator, the condition for combining their
    /// bytes (RFC 9111 section 3.4, RFC 9110 section 15.3.7.3): equal strong entity tags (RFC
    /// 9110 section 8.8.3.2's strong comparison: neither weak, the same characters); or, when
    /// neither has an `ETag`, the same `Last-Modified`, strong in both because each one's
    /// `Date` is at least a second later (section 8.8.2.2). A weak tag never matches. `now`
    /// places a two-digit year.
    static func shareStrongValidator(_ a: (String) -> String?, _ b: (String) -> String?, now: Date) -> Bool {
        let tags = (a("ETag"), b("ETag"))
        if tags.0 != nil || tags.1 != nil {
            guard let first = strongETag(tags.0), let second = strongETag(tags.1) else { return false }
            return first == second
        }
        guard let first = strongLastModified(a, now: now), let second = strongLastModified(b, now: now) else { return false }
        return first == second
    }

    /// The field as a strong entity tag (`"opaque"`, RFC 9110 section 8.8.3), trimmed; nil for a
    /// weak or malformed one.
    static func strongETag(_ field: String?) -> String? {
        guard let tag = field?.trimmingCharacters(in: CharacterSet(charactersIn: " \t")), tag.unicodeScalars.count >= 2,
              tag.hasPrefix("\""), tag.hasSuffix("\"") else { return nil }
        let opaque = tag.unicodeScalars.dropFirst().dropLast()
        guard opaque.allSatisfy({ $0.value == 0x21 || (0x23...0x7E).contains($0.value) || (0x80...0xFF).contains($0.value) }) else {
            return nil
        }
        return tag
    }

    /// A response's `Last-Modified` when it is a strong validator for a cache: its `Date` is at
    /// least one second later (RFC 9110 section 8.8.2.2).
    static func strongLastModified(_ header: (String) -> String?, now: Date) -> Date? {
        guard let lastModified = header("Last-Modified").flatMap({ HTTPDate.parse($0, now: now) }),
              let date = header("Date").flatMap({ HTTPDate.parse($0, now: now) }), date.timeIntervalSince(lastModified) >= 1 else {
            return nil
        }
        return lastModified
    }

    /// The value of an `If-Range` that asks for a range of this response only if it is still
    /// current: its strong `ETag`, else its strong `Last-Modified`; nil when it has neither.
    static func ifRangeValue(_ header: (String) -> String?, now: Date) -> String? {
        if let etag = header("ETag") { return strongETag(etag) }
        return strongLastModified(header, now: now) == nil ? nil : header("Last-Modified")
    }
}
