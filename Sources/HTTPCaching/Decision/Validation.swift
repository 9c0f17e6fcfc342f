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
    /// equal the entry's; a 304 with neither selects the one entry there is.
    static func selects(_ notModified: ResponseHead, _ entry: CacheEntry) -> Bool {
        if let etag = notModified.header("ETag")?.trimmingCharacters(in: .whitespaces) {
            guard let stored = entry.header("ETag")?.trimmingCharacters(in: .whitespaces) else { return false }
            if etag.hasPrefix("W/") { return opaque(etag) == opaque(stored) }
            return !stored.hasPrefix("W/") && etag == stored
        }
        if let lastModified = notModified.header("Last-Modified") {
            guard let date = HTTPDate.parse(lastModified, now: entry.storedAt) else { return false }
            return entry.header("Last-Modified").flatMap { HTTPDate.parse($0, now: entry.storedAt) } == date
        }
        return true
    }

    private static func opaque(_ etag: String) -> String {
        etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    }

    /// Fields a 304 must not change in the stored entry (RFC 9111 section 3.2): they describe
    /// the stored body, which the 304 does not replace.
    static let keptOnUpdate: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]

    /// The stored entry updated by a selecting 304 (RFC 9111 section 4.3.4): the 304's fields
    /// replace the stored ones, but framing fields and fields that are never stored
    /// (`Set-Cookie` unless kept, hop-by-hop); the body is kept; the age starts again.
    static func merge(_ entry: CacheEntry, notModified: ResponseHead, keepingCookies: Bool, now: Date) -> CacheEntry {
        var updated = entry
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
}
