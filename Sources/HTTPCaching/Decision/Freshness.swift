import Foundation

/// Freshness and age as a private cache computes them (RFC 9111 section 4.2).
enum Freshness {
    /// Statuses whose responses may be given a heuristic lifetime (RFC 9110 section 15.1).
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Where a lifetime came from, for `explain`.
    enum Source: String, Sendable, Equatable {
        case maxAge = "max-age"
        case expires = "Expires"
        case invalidExpires = "Expires (invalid: already expired)"
        case invalidMaxAge = "max-age (invalid: stale)"
        case heuristic = "10% of the time since Last-Modified"
        case none = "no explicit lifetime"
        case windows = "the fresh window"
    }

    /// The freshness lifetime: `max-age`, else `Expires` minus `Date`, else 10% of the time
    /// since `Last-Modified` for heuristically cacheable statuses and responses marked `public`
    /// (RFC 9111 section 5.2.2.9), else zero. `s-maxage` is for shared caches and is ignored.
    /// An invalid `Expires` means already expired.
    static func lifetime(of entry: CacheEntry) -> TimeInterval {
        lifetimeAndSource(statusCode: entry.statusCode, header: entry.header, storedAt: entry.storedAt).lifetime
    }

    /// - Parameter storedAt: when the response arrived; two-digit RFC 850 years are read
    ///   against it, so the result never depends on the wall clock.
    static func lifetimeAndSource(statusCode: Int, header: (String) -> String?, storedAt: Date)
        -> (lifetime: TimeInterval, source: Source) {
        let directives = CacheControl(header("Cache-Control"))
        switch directives.delta("max-age") {
        case .seconds(let maxAge): return (maxAge, .maxAge)
        case .bare, .invalid: return (0, .invalidMaxAge) // RFC 9111 section 4.2.1: treat as stale
        case .absent: break
        }
        let date = header("Date").flatMap { HTTPDate.parse($0, now: storedAt) } ?? storedAt
        switch HTTPFieldParsing.expires(header("Expires"), now: storedAt) {
        case .date(let expiry): return (clamp(expiry.timeIntervalSince(date)), .expires)
        case .invalid: return (0, .invalidExpires) // RFC 9111 section 5.3: already expired
        case .absent: break
        }
        if let lastModified = header("Last-Modified").flatMap({ HTTPDate.parse($0, now: storedAt) }),
           heuristicallyCacheable.contains(statusCode) || directives.has("public") {
            return (clamp(date.timeIntervalSince(lastModified) / 10), .heuristic)
        }
        return (0, .none)
    }

    /// Whether a response states its lifetime itself (`max-age` or `Expires`), or says
    /// `public` or `private`: what makes any final status storable (RFC 9111 section 3).
    static func isExplicitlyCacheable(header: (String) -> String?) -> Bool {
        let directives = CacheControl(header("Cache-Control"))
        return directives.has("max-age") || header("Expires") != nil || directives.has("public") || directives.has("private")
    }

    /// The current age: the age the response already had when stored (the larger of its
    /// `Age` header and the time since its `Date`), plus the time since it was stored (from
    /// when its request was sent, so the response's delay counts: RFC 9111 section 4.2.3).
    static func currentAge(of entry: CacheEntry, at now: Date) -> TimeInterval {
        clamp(initialAge(header: entry.header, receivedAt: entry.storedAt) + entry.age(at: now))
    }

    /// The age a response already had when it arrived: the larger of its `Age` field (an
    /// invalid one ignored) and the time between its `Date` and its arrival.
    static func initialAge(header: (String) -> String?, receivedAt: Date) -> TimeInterval {
        let ageHeader = HTTPFieldParsing.age(header("Age")) ?? 0
        let apparent = header("Date").flatMap { HTTPDate.parse($0, now: receivedAt) }
            .map { clamp(receivedAt.timeIntervalSince($0)) } ?? 0
        return max(ageHeader, apparent)
    }

    /// A duration made finite and within 0...2^31 seconds, as RFC 9111 section 1.2.2 asks of
    /// every calculation that overflows.
    static func clamp(_ seconds: TimeInterval) -> TimeInterval {
        guard seconds.isFinite else { return seconds > 0 ? HTTPFieldParsing.maxDeltaSeconds : 0 }
        return min(max(0, seconds), HTTPFieldParsing.maxDeltaSeconds)
    }
}
