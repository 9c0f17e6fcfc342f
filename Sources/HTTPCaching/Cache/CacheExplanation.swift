import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the cache would do with a request, and why, worked out from the store without the
/// network: the answer to "why was this (not) served from the cache?".
///
/// Made by `HTTPCache.explain(_:)` and `CacheInstallation.explain(_:)`. Print it
/// (`description`) for a report of a few lines, or encode it (`JSONEncoder`) for tools. It
/// shows whether the key holds a credential partition, never the partition's value.
public struct CacheExplanation: Sendable, Encodable, CustomStringConvertible {
    /// The key a request is looked up under.
    public struct Key: Sendable, Encodable, Equatable {
        /// The method the entry is stored for (a HEAD is answered from the GET).
        public let method: String
        /// The normalized URL, after the configuration's `keyRewriter`.
        public let url: String
        /// Whether the request carries credentials, so its entries live in a partition of
        /// their own (a keyed hash of the credentials, never shown).
        public let credentialPartition: Bool
        /// The cache's namespace; nil when empty.
        public let namespace: String?
    }

    /// Freshness windows, in seconds.
    public struct Windows: Sendable, Encodable, Equatable {
        /// Served with no network while younger than this.
        public let fresh: Double
        /// Served, then refreshed in the background, while younger than this.
        public let usable: Double
        /// Where they come from: the request's `cacheWindows`, the entry's own windows, or the
        /// configuration.
        public let source: String
    }

    /// The stored entry that would answer the request.
    public struct Entry: Sendable, Encodable, Equatable {
        /// Its HTTP status code.
        public let statusCode: Int
        /// When it was stored, as an HTTP date.
        public let storedAt: String
        /// The length of its body, in bytes.
        public let bodyBytes: Int
        /// Its age in seconds, as the policy counts it.
        public let age: Double
        /// What the age is made of.
        public let ageSource: String
        /// How long it is fresh, in seconds; nil for policies that do not say.
        public let lifetime: Double?
        /// Where the lifetime comes from: `max-age`, `Expires`, the heuristic, the fresh window, ...
        public let lifetimeSource: String?
        /// Freshness left in seconds (lifetime minus age); negative once stale.
        public let ttl: Double?
        /// The response's `Cache-Control`, if any.
        public let cacheControl: String?
        /// The validators it can be revalidated with (`ETag`, `Last-Modified`).
        public let validators: [String]
        /// The request fields its `Vary` names, lower-cased.
        public let vary: [String]
        /// How many variants of its URL are listed as stored (at most
        /// 8); nil when it does not vary.
        public let variantsStored: Int?
        /// Whether the response would be stored as it is under the configuration in force now.
        public let storable: Bool
        /// Why it was stored, or why it would not be stored now.
        public let storage: String
        /// The `No-Vary-Search` it was stored under; nil when it was stored under its own URL.
        public let noVarySearch: NoVarySearchMatch?
        /// For a partial entry, what it holds of the representation: `bytes 0-499, 1000-1499 of
        /// 5000 (1000 bytes in 2 spans)`; nil for a whole one.
        public let partialContent: String?
    }

    /// How an entry stored under its response's `No-Vary-Search` answers the request.
    public struct NoVarySearchMatch: Sendable, Encodable, Equatable {
        /// The field as the cache understood it, in the latest draft's syntax (for example
        /// `params=("utm_source")`, `except=("page")`, `key-order`).
        public let config: String
        /// The URL it was stored for.
        public let storedURL: String
        /// Whether that is another URL than the request's, which the field makes equivalent
        /// (the answer then carries `Cache-Status` `detail=no-vary-search`).
        public let otherURL: Bool
    }

    /// Why the last response for a key was not stored.
    public struct NotStored: Sendable, Encodable, Equatable {
        /// The reason, in a sentence (`NotStoredReason.description`).
        public let reason: String
        /// When, as an HTTP date by the cache's clock.
        public let date: String
    }

    /// What would happen to the request.
    public struct Outcome: Sendable, Encodable, Equatable {
        /// `serve` (from the store), `forward` (to the network), `gateway-timeout` (a 504 the
        /// cache makes: the request says `only-if-cached` and nothing stored may answer) or `fail`.
        public let action: String
        /// How `X-HTTP-Caching` would report it: `fresh`, `stale`, `miss`, `expired`, `bypass`
        /// (a forwarded request that validates becomes `revalidated` on a 304, and one that may
        /// fall back becomes `fallback` when the origin fails).
        public let cacheStatus: CacheStatus
        /// What the network sees: nothing, a background refresh, a conditional request, a request.
        public let network: String
        /// Why the request would go to the network: RFC 9211's `fwd` (`uri-miss`,
        /// `vary-miss`, `miss`, `stale`, `request`, `method`, `bypass`); nil when served.
        public let forwardReason: String?
        /// The cache's `Cache-Status` member as far as it is known ahead (a forwarded answer
        /// adds `fwd-status`, and `stored` when it is stored).
        public let cacheStatusField: String
        /// Whether the answer may be stored.
        public let stores: Bool
        /// Whether the stored entry would be served instead if the network failed or the
        /// origin answered 5xx.
        public let fallback: Bool
        /// One line.
        public let summary: String
    }

    /// The request's method, upper-cased.
    public let method: String
    /// The request's URL.
    public let url: String
    /// The key it is looked up under.
    public let key: Key
    /// The policy that decides (encoded by name: `two-tier`, `http`, `cache-first`, ...).
    public let policy: CachingPolicy
    /// Where the policy comes from.
    public let policySource: String
    /// The windows in force.
    public let windows: Windows
    /// The stored entry that would answer, if any.
    public let entry: Entry?
    /// Whether something is stored under the URL for other values of the fields its `Vary`
    /// names.
    public let otherVariantsStored: Bool
    /// When no entry answers: why the last response for this key was not stored, as far as
    /// this process saw it (the 1,000 most recent keys are remembered).
    public let lastNotStored: NotStored?
    /// What would happen.
    public let outcome: Outcome
    /// Why, one sentence each, in the order the decision weighed them.
    public let reasons: [String]

    /// A report of a few lines: the request, key, policy and windows, the entry, the outcome
    /// and the reasons.
    public var description: String {
        var lines = ["\(method) \(url)"]
        func row(_ label: String, _ text: String) {
            lines.append("  " + label.padding(toLength: 9, withPad: " ", startingAt: 0) + text)
        }
        func more(_ text: String) { lines.append(String(repeating: " ", count: 11) + text) }
        var keyText = "\(key.method) \(key.url)"
        if key.credentialPartition { keyText += " [credentials: a partition of their own]" }
        if let namespace = key.namespace { keyText += " [namespace \(namespace)]" }
        row("key", keyText)
        row("policy", "\(policy) (\(policySource))")
        row("windows", "fresh \(Self.seconds(windows.fresh)), usable \(Self.seconds(windows.usable)) (\(windows.source))"
            + (policy == .httpSemantics ? "; freshness comes from the response under this policy" : ""))
        if let entry {
            row("entry", "status \(entry.statusCode), \(entry.bodyBytes) bytes, stored \(entry.storedAt)")
            if let partialContent = entry.partialContent { more("partial: \(partialContent)") }
            more("age \(Self.seconds(entry.age)) (\(entry.ageSource))")
            if let lifetime = entry.lifetime {
                var text = "lifetime \(Self.seconds(lifetime))"
                if let source = entry.lifetimeSource { text += " (\(source))" }
                if let ttl = entry.ttl { text += ttl > 0 ? ": \(Self.seconds(ttl)) of freshness left" : ": stale by \(Self.seconds(-ttl))" }
                more(text)
            }
            if let cacheControl = entry.cacheControl { more("Cache-Control: \(cacheControl)") }
            more("validators: " + (entry.validators.isEmpty ? "none" : entry.validators.joined(separator: ", ")))
            if !entry.vary.isEmpty {
                more("Vary: \(entry.vary.joined(separator: ", "))" + (entry.variantsStored.map { " (\($0) variant\($0 == 1 ? "" : "s") stored)" } ?? ""))
            }
            if let match = entry.noVarySearch {
                more("No-Vary-Search: \(match.config)" + (match.otherURL ? " (stored for \(match.storedURL))" : ""))
            }
            more((entry.storable ? "stored: " : "would not be stored now: ") + entry.storage)
        } else {
            row("entry", otherVariantsStored ? "none for this request (stored for other values of the fields its Vary names)" : "none")
            if let lastNotStored { more("last response not stored (\(lastNotStored.date)): \(lastNotStored.reason)") }
        }
        row("answer", outcome.summary)
        more("network: \(outcome.network)")
        more("Cache-Status: \(outcome.cacheStatusField)")
        if outcome.action == "forward" {
            more("the answer " + (outcome.stores ? "may be stored" : "is not stored")
                 + (outcome.fallback ? "; if the origin fails, the stored entry is served as a fallback" : ""))
        }
        if let first = reasons.first {
            row("why", "- " + first)
            for reason in reasons.dropFirst() { more("- " + reason) }
        }
        return lines.joined(separator: "\n")
    }

    static func seconds(_ value: Double) -> String {
        guard value.isFinite else { return "\(value) s" }
        return value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : String(format: "%.1f s", value)
    }
}
