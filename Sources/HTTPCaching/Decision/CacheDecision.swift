import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one request was answered, as the response header and events report it.
public enum CacheStatus: String, Sendable, CaseIterable {
    /// Served from the store, younger than the fresh window; no network.
    case fresh
    /// Served from the store, past the fresh window but usable; refreshed in the background.
    case stale
    /// No stored entry: fetched from the network.
    case miss
    /// The stored entry was past the usable window: removed and fetched again.
    case expired
    /// Not cacheable (method, status, `no-store`, a conditional or range request): passed
    /// through untouched.
    case bypass
}

/// What the cache does with one request. Produced by `CacheDecision`, carried out by the
/// URLProtocol plumbing.
enum CacheAction: Equatable, Sendable {
    /// Answer from the stored entry (`.fresh`, or `.stale` with a background refresh).
    case serve(CacheStatus, age: TimeInterval)
    /// Go to the network (`.miss`, `.expired` after removing the entry, or `.bypass`).
    case forward(CacheStatus)
    /// An unsafe method: pass it through and remove any entry stored for its URL.
    case invalidate
}

/// The caching decision: pure functions of the request, the stored entry, the time and the
/// configuration. No I/O happens here.
enum CacheDecision {
    /// Methods whose success changes the resource: they invalidate what is stored.
    static let invalidatingMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    /// Request headers that make a GET the caller's own conditional or partial request,
    /// which passes through untouched.
    static let passThroughRequestHeaders = ["If-None-Match", "If-Modified-Since", "If-Match",
                                            "If-Unmodified-Since", "If-Range", "Range"]

    /// Decides what to do with a request.
    /// - Parameters:
    ///   - request: the request as the caller sent it.
    ///   - entry: the entry stored under the request's key, if any.
    ///   - now: the current time.
    ///   - windows: the windows that apply (see `windows(for:entry:default:)`).
    static func decide(request: URLRequest, entry: CacheEntry?, now: Date, windows: CacheWindows) -> CacheAction {
        let method = request.httpMethod?.uppercased() ?? "GET"
        if invalidatingMethods.contains(method) { return .invalidate }
        guard method == "GET" else { return .forward(.bypass) }
        for name in passThroughRequestHeaders where request.value(forHTTPHeaderField: name) != nil {
            return .forward(.bypass)
        }
        guard let entry else { return .forward(.miss) }
        let age = entry.age(at: now)
        if age < windows.fresh { return .serve(.fresh, age: age) }
        if age < windows.usable { return .serve(.stale, age: age) }
        return .forward(.expired)
    }

    /// The windows for a request: the request's own, else the entry's, else the default.
    static func windows(for request: URLRequest, entry: CacheEntry?, default fallback: CacheWindows) -> CacheWindows {
        if let value = request.value(forHTTPHeaderField: HTTPCachingHeaders.windows),
           let windows = CacheWindows(headerValue: value) {
            return windows
        }
        return entry?.windows ?? fallback
    }

    /// Whether a response to a request may be stored.
    ///
    /// Only GET responses with one of `statusCodes` whose `Cache-Control` does not say
    /// `no-store`.
    static func isStorable(request: URLRequest, response: HTTPURLResponse, statusCodes: Set<Int>) -> Bool {
        guard (request.httpMethod?.uppercased() ?? "GET") == "GET",
              statusCodes.contains(response.statusCode) else { return false }
        if let cacheControl = response.value(forHTTPHeaderField: "Cache-Control"),
           cacheControlDirectives(cacheControl).contains("no-store") {
            return false
        }
        return true
    }

    /// The directive names of a `Cache-Control` value, lower-cased, without arguments.
    static func cacheControlDirectives(_ value: String) -> Set<String> {
        Set(value.split(separator: ",").compactMap { part in
            let name = part.split(separator: "=", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces).lowercased()
            return name?.isEmpty == false ? name : nil
        })
    }
}
