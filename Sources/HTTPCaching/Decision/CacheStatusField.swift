import Foundation

/// How a response was produced, as the `Cache-Status` field (RFC 9211) and `X-HTTP-Caching`
/// report it.
struct Disposition: Sendable, Equatable, Hashable {
    /// The cache's own status word.
    var status: CacheStatus
    /// Answered from the store without going to the origin.
    var hit = false
    /// Why the request went to the origin, if it did.
    var forward: ForwardReason?
    /// The status the origin answered with, when it answered.
    var forwardStatus: Int?
    /// Whether the response was stored.
    var stored = false
    /// Whether the request waited for another one's answer instead of asking the origin.
    var collapsed = false
    /// Freshness left, in seconds (negative once stale).
    var ttl: TimeInterval?
    /// The `Age` an answer from the store carries.
    var age: TimeInterval?
    /// More about the outcome, for people.
    var detail: String?
    /// Answered by an entry stored for another URL, which its `No-Vary-Search` lets answer
    /// this one (`detail=no-vary-search` when there is no other detail).
    var noVarySearch = false
}

/// Writes the `Cache-Status` field (RFC 9211): one list member per cache, origin-most first,
/// so the cache appends its member to any the response already carries.
enum CacheStatusField {
    /// The field name.
    static let name = "Cache-Status"

    /// This cache's member: its name, then `hit` or `fwd=...`, then the parameters that apply.
    static func member(_ disposition: Disposition, cacheName: String) -> String {
        var member = item(cacheName)
        if disposition.hit { member += "; hit" }
        if let forward = disposition.forward { member += "; fwd=\(forward.rawValue)" }
        if let status = disposition.forwardStatus, (100...999).contains(status) { member += "; fwd-status=\(status)" }
        if let ttl = disposition.ttl, ttl.isFinite {
            let seconds = Int(max(-Freshness.clamp(-ttl), min(ttl, HTTPFieldParsing.maxDeltaSeconds)).rounded(.down))
            member += "; ttl=\(seconds)"
        }
        if disposition.stored { member += "; stored" }
        if disposition.collapsed { member += "; collapsed" }
        if let detail = disposition.detail {
            member += "; detail=\(item(detail))"
        } else if disposition.noVarySearch {
            member += "; detail=\(NoVarySearch.statusDetail)"
        }
        return member
    }

    /// `existing` with `member` appended as the last list member.
    static func appending(_ member: String, to existing: String?) -> String {
        guard let existing, !existing.trimmingCharacters(in: .whitespaces).isEmpty else { return member }
        return existing + ", " + member
    }

    /// The symbols an sf-token may hold besides letters and digits (RFC 8941 §3.3.4).
    private static let tokenSymbols = Array("!#$%&'*+-.^_`|~:/".utf8)

    /// A token when the text is one (RFC 8941 sf-token), else a quoted string.
    private static func item(_ text: String) -> String {
        func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 97 && (byte | 0x20) <= 122 }
        if let first = text.utf8.first, isLetter(first) || first == UInt8(ascii: "*"),
           text.utf8.allSatisfy({ isLetter($0) || ($0 >= 48 && $0 <= 57) || tokenSymbols.contains($0) }) {
            return text
        }
        var quoted = "\""
        for scalar in text.unicodeScalars where scalar.value >= 0x20 && scalar.value < 0x7f {
            if scalar == "\"" || scalar == "\\" { quoted += "\\" }
            quoted.unicodeScalars.append(scalar)
        }
        return quoted + "\""
    }
}

/// The heads of the responses the cache gives its callers.
enum Answers {
    /// A response from a stored entry: its status and fields, `Age`, the status fields, and
    /// for a range or a HEAD the matching status, `Content-Range` and `Content-Length`. A
    /// partial entry answers only ranges (the decision never asks it for more): their bytes
    /// are found in its spans, and the length is its complete length.
    /// - Returns: the head, and the part of the stored body to send.
    static func fromEntry(_ entry: CacheEntry, form: ServeForm, disposition: Disposition,
                          cacheName: String) -> (head: ResponseHead, body: Range<Int>) {
        var headers = entry.headers
        var status = entry.statusCode
        var body = 0..<entry.body.count
        let length = entry.partialContent?.completeLength ?? entry.body.count
        func set(_ name: String, _ value: String?) {
            if let existing = headers.keys.first(where: { $0.equalsIgnoringASCIICase(name) }) { headers[existing] = nil }
            if let value { headers[name] = value }
        }
        switch form {
        case .whole:
            break
        case .headersOnly:
            // A coded body's stored bytes are decoded: its own Content-Length, if any, stays.
            if !entry.isContentCoded { set("Content-Length", String(entry.body.count)) }
            body = 0..<0
        case .range(let bytes):
            status = 206
            set("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(length)")
            set("Content-Length", String(bytes.count))
            body = entry.partialContent.map { $0.bodyRange(of: bytes) ?? 0..<0 } ?? bytes.lowerBound..<(bytes.upperBound + 1)
        case .notModified:
            status = 304
            set("Content-Length", nil)
            body = 0..<0
        case .rangeNotSatisfiable:
            status = 416
            set("Content-Range", "bytes */\(length)")
            set("Content-Length", "0")
            set("Content-Type", nil)
            body = 0..<0
        }
        set("Age", HTTPFieldParsing.ageHeaderValue(disposition.age ?? 0))
        addStatusFields(&headers, disposition, cacheName: cacheName)
        return (ResponseHead(statusCode: status, headers: headers, url: entry.url), body)
    }

    /// The network's response with the status fields added.
    static func fromNetwork(_ head: ResponseHead, disposition: Disposition, cacheName: String) -> ResponseHead {
        var head = head
        addStatusFields(&head.headers, disposition, cacheName: cacheName)
        return head
    }

    private static func addStatusFields(_ headers: inout [String: String], _ disposition: Disposition, cacheName: String) {
        headers[HTTPCachingHeaders.statusField] = disposition.status.rawValue
        let existingName = headers.keys.first { $0.equalsIgnoringASCIICase(CacheStatusField.name) }
        let existing = existingName.flatMap { headers[$0] }
        if let existingName { headers[existingName] = nil }
        headers[CacheStatusField.name] = CacheStatusField.appending(CacheStatusField.member(disposition, cacheName: cacheName),
                                                                    to: existing)
    }
}
