import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A caller's own `If-None-Match` or `If-Modified-Since` on a GET or HEAD (RFC 9111 section
/// 4.3.2): evaluated against a stored entry that may answer the request, else sent to the
/// origin as the caller made it (its answer passes through, unstored).
enum CallerConditional {
    /// Whether the request's conditions are ones the cache evaluates itself: a GET or HEAD
    /// (as sent: a keyed body's conditions pass through) with `If-None-Match` or
    /// `If-Modified-Since`, and none of `If-Match`, `If-Unmodified-Since`, `If-Range` or
    /// `Range` (those always pass through).
    static func evaluable(_ headers: RequestHeaders, method: String) -> Bool {
        (method == "GET" || method == "HEAD")
            && (headers.value("If-None-Match") != nil || headers.value("If-Modified-Since") != nil)
            && ["If-Match", "If-Unmodified-Since", "If-Range", "Range"].allSatisfy { headers.value($0) == nil }
    }

    /// Whether the entry meets the request's condition for a 304 (RFC 9110 section 13.2.2):
    /// `If-None-Match` by weak comparison (`*` matches any), else `If-Modified-Since` against
    /// the entry's `Last-Modified` (else its `Date`, else when it was stored: RFC 9111 section
    /// 4.3.2). Never for an entry that is not a 2xx: conditions apply to a current
    /// representation only (RFC 9110 sections 13.1.2, 13.2.1).
    static func notModified(_ headers: RequestHeaders, _ entry: CacheEntry) -> Bool {
        guard (200..<300).contains(entry.statusCode) else { return false }
        if let tags = headers.value("If-None-Match") {
            let list = entityTags(tags)
            if list.contains("*") { return true }
            guard let stored = entry.header("ETag").map({ Validation.opaque($0.trimmingCharacters(in: .whitespaces)) }) else {
                return false
            }
            return list.contains { Validation.opaque($0) == stored }
        }
        let date = { (value: String?) in value.flatMap { HTTPDate.parse($0, now: entry.storedAt) } }
        guard let since = date(headers.value("If-Modified-Since")) else { return false }
        return (date(entry.header("Last-Modified")) ?? date(entry.header("Date")) ?? entry.storedAt) <= since
    }

    /// The evaluation of a request with evaluable conditions: an answer from the entry (a
    /// fresh one, or any under `only-if-cached`) becomes a 304 where the entry meets the
    /// condition; anything else that would reach the network goes as the caller made it.
    static func adjust(_ evaluation: CacheDecision.Evaluation, headers: RequestHeaders, entry: CacheEntry?,
                       onlyIfCached: Bool) -> CacheDecision.Evaluation {
        var adjusted = evaluation
        guard evaluation.policy != .networkOnly else { return evaluation }
        switch evaluation.action {
        case .fail:
            return evaluation
        case .serve(var plan) where (plan.status == .fresh || onlyIfCached) && [.whole, .headersOnly].contains(plan.form):
            if let entry, notModified(headers, entry) { plan.form = .notModified }
            plan.refresh = false
            adjusted.action = .serve(plan)
        default:
            let field = headers.value("If-None-Match") != nil ? "If-None-Match" : "If-Modified-Since"
            adjusted.action = .forward(.bypass(.bypass, passThrough: true))
            adjusted.notes.append(.conditionalRequest(field: field))
        }
        return adjusted
    }

    /// The entity tags of an `If-None-Match` list, each trimmed (commas inside quotes kept).
    static func entityTags(_ value: String) -> [String] {
        var tags: [String] = []
        var current = ""
        var quoted = false
        for character in value {
            if character == "\"" { quoted.toggle() }
            if character == "," && !quoted {
                tags.append(current.trimmingCharacters(in: .whitespaces))
                current = ""
            } else {
                current.append(character)
            }
        }
        tags.append(current.trimmingCharacters(in: .whitespaces))
        return tags.filter { !$0.isEmpty }
    }
}
