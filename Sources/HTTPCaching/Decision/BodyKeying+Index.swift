import Foundation

/// The keyed-body index: which keyed bodies (`BodyKeying`) are stored for a URL, so that an
/// unsafe request to it invalidates them (RFC 9111 section 4.4: a QUERY's target URI is its
/// URL). Keyed entries are stored under `<url>#body=<digest>`, which nothing finds from the
/// URL alone; the index is an entry of its own under the URL with the digest left out of its
/// marker (`<url>#body=`, variant `@bodies`), listing one line per stored body, oldest first:
/// the method, the digest and the entry's end of use. These are its pure parts.
extension BodyKeying {
    /// What precedes a keyed body's digest in a key's URL.
    static let keyMarker = "#body="
    /// The variant of the index's key: no variant has it (variant names are hex digests).
    static let indexVariant = "@bodies"
    /// The most bodies one URL's index lists: past it, the entry stored longest ago is removed.
    static let maxBodiesPerURL = 64

    /// One body the index lists.
    struct IndexLine: Sendable, Equatable {
        /// The method of the entry's key, upper-case.
        var method: String
        /// The body's digest, as in the entry's key.
        var digest: String
        /// The entry's end of use (`CacheEntry.usefulUntil`), to whole seconds; nil: no known end.
        var usefulUntil: Date?
    }

    /// The key of the index listing the keyed bodies stored for the URL of `key`: its URL with
    /// the digest that follows its marker dropped, method GET, variant `@bodies`; the
    /// partition and namespace kept. Nil for a key with no marker.
    static func indexKey(for key: CacheKey) -> CacheKey? {
        guard let marker = key.url.range(of: keyMarker) else { return nil }
        let digestEnd = key.url[marker.upperBound...].firstIndex { !isDigestCharacter($0) } ?? key.url.endIndex
        var index = key
        index.url = String(key.url[..<marker.upperBound]) + key.url[digestEnd...]
        index.method = "GET"
        index.variant = indexVariant
        return index
    }

    /// The digest in the URL of a keyed entry's key; nil when it has none.
    static func digest(in key: CacheKey) -> String? {
        guard let marker = key.url.range(of: keyMarker) else { return nil }
        let digest = key.url[marker.upperBound...].prefix(while: isDigestCharacter)
        return digest.isEmpty ? nil : String(digest)
    }

    /// The key of the entry (without variant) an index line names; nil when it would not be
    /// listed in this index (so a damaged line never names another URL's entry).
    static func entryKey(in index: CacheKey, line: IndexLine) -> CacheKey? {
        guard let marker = index.url.range(of: keyMarker) else { return nil }
        var key = index
        key.url.insert(contentsOf: line.digest, at: marker.upperBound)
        key.method = line.method
        key.variant = nil
        return indexKey(for: key) == index && digest(in: key) == line.digest ? key : nil
    }

    /// The body of an index: a line per body, `<method> <digest> <end>`, the end in whole
    /// seconds since 1970 (rounded up), `-` for none.
    static func indexBody(_ lines: [IndexLine]) -> Data {
        Data(lines.map { line in
            let end = line.usefulUntil.map { String(Int64($0.timeIntervalSince1970.rounded(.up))) } ?? "-"
            return "\(line.method) \(line.digest) \(end)\n"
        }.joined().utf8)
    }

    /// The lines an index body lists; nil when it is not one.
    static func lines(inIndexBody body: Data) -> [IndexLine]? {
        var lines: [IndexLine] = []
        for text in String(decoding: body, as: UTF8.self).split(separator: "\n") {
            let parts = text.split(separator: " ", omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, parts[1].allSatisfy(isDigestCharacter) else { return nil }
            var end: Date?
            if parts[2] != "-" {
                guard let seconds = Int64(parts[2]) else { return nil }
                end = Date(timeIntervalSince1970: TimeInterval(seconds))
            }
            lines.append(IndexLine(method: String(parts[0]), digest: String(parts[1]), usefulUntil: end))
        }
        return lines
    }

    /// The lines once a body is stored, ending at `end`: the expired ones (ended by `now`) and
    /// its own earlier line left out, its own last; then the oldest past `maxBodiesPerURL`,
    /// returned apart, whose entries are to be removed. Nil when nothing needs writing: it is
    /// listed already, to an end that lasts through `end`.
    static func listing(_ line: IndexLine, in lines: [IndexLine], now: Date) -> (lines: [IndexLine], dropped: [IndexLine])? {
        let rounded = line.usefulUntil.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.up)) }
        let same = { (other: IndexLine) in other.method == line.method && other.digest == line.digest }
        if let listed = lines.first(where: same), lasts(listed.usefulUntil, through: rounded) { return nil }
        var kept = lines.filter { !same($0) && !($0.usefulUntil.map { $0 <= now } ?? false) }
        kept.append(IndexLine(method: line.method, digest: line.digest, usefulUntil: rounded))
        let dropped = Array(kept.prefix(max(0, kept.count - maxBodiesPerURL)))
        return (Array(kept.dropFirst(dropped.count)), dropped)
    }

    /// The end of use of an index listing `lines`: the latest of theirs; none when one has none.
    static func indexEnd(_ lines: [IndexLine]) -> Date? {
        var latest: Date?
        for line in lines {
            guard let end = line.usefulUntil else { return nil }
            latest = max(latest ?? end, end)
        }
        return latest
    }

    /// Whether a character may be part of a digest: a lower-case hex digit.
    private static func isDigestCharacter(_ character: Character) -> Bool {
        ("0"..."9").contains(character) || ("a"..."f").contains(character)
    }

    /// Whether something of use until `end` lasts through `other` (nil: no known end).
    private static func lasts(_ end: Date?, through other: Date?) -> Bool {
        guard let end else { return true }
        guard let other else { return false }
        return end >= other
    }
}
