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
        /// `serve` (from the store), `forward` (to the network) or `fail`.
        public let action: String
        /// How `X-HTTP-Caching` would report it: `fresh`, `stale`, `miss`, `expired`, `bypass`
        /// (a forwarded request that validates becomes `revalidated` on a 304, and one that may
        /// fall back becomes `fallback` when the origin fails).
        public let cacheStatus: String
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
    /// The policy that decides, by name (`two-tier`, `http`, `cache-first`, ...).
    public let policy: String
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
            + (policy == CachingPolicy.httpSemantics.name ? "; freshness comes from the response under this policy" : ""))
        if let entry {
            row("entry", "status \(entry.statusCode), \(entry.bodyBytes) bytes, stored \(entry.storedAt)")
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

extension CacheExplanation {
    /// Works out the explanation: the key, the lookup, `CacheDecision.evaluate`, and what
    /// `Storability` says of the entry. Reads the store; never the network.
    static func make(request: URLRequest, keys: KeyDerivation, cache: CacheEngine) -> CacheExplanation {
        let configuration = cache.configuration
        let now = cache.now()
        let headers = keys.headers(request)
        let method = request.httpMethod?.uppercased() ?? "GET"
        let credentialed = keys.isCredentialed(headers)
        var reasons: [String] = []

        var key: CacheKey
        var entry: CacheEntry?
        var otherVariant: Bool? = false
        var storeUnavailable = false
        // An unsafe method is keyed as the GET it would invalidate.
        let isUnsafe = !CacheDecision.safeMethods.contains(method)
        let keyMethod = isUnsafe ? "GET" : nil
        do {
            key = try keys.key(for: request, headers: headers, method: keyMethod, secret: cache.partitionSecret)
            if method == "GET" || method == "HEAD" || isUnsafe {
                (entry, otherVariant) = cache.lookup(key, headers: headers)
            }
        } catch {
            key = keys.key(for: request, headers: headers, method: keyMethod, secret: { [] })
            storeUnavailable = true
            reasons.append("the store's partition secret could not be read (\(error)): this credentialed request can be neither looked up nor stored")
        }
        let invalidated = isUnsafe ? entry : nil
        if isUnsafe { entry = nil }
        var decidingConfiguration = configuration
        if storeUnavailable { decidingConfiguration.storesCredentialedResponses = false }
        let evaluation = CacheDecision.evaluate(request: request, headers: headers, entry: entry,
                                                otherVariant: otherVariant, credentialed: credentialed, now: now,
                                                configuration: decidingConfiguration)
        if otherVariant == nil { reasons.append("the store could not be read; the lookup counts as a miss") }

        let policy = CacheDecision.policy(for: request, configuration: configuration)
        let windows = CacheDecision.windows(for: request, entry: entry, default: configuration.windows)
        let windowsSource: String
        if request.value(forHTTPHeaderField: HTTPCachingHeaders.windows).flatMap(CacheWindows.init(headerValue:)) != nil {
            windowsSource = "the request's cacheWindows"
        } else if entry?.windows != nil {
            windowsSource = "the entry's own windows"
        } else {
            windowsSource = "the configuration"
        }

        let described = entry.map { describe($0, policy: policy, windows: windows, evaluation: evaluation, credentialed: credentialed,
                                             request: request, cache: cache, now: now) }
        reasons += evaluation.notes
        let outcome = Self.outcome(evaluation, method: method, entry: entry, windows: windows, policy: policy,
                                   configuration: configuration, cache: cache, reasons: &reasons)
        if invalidated != nil {
            reasons.append("a response is stored for GET \(key.url): a non-error answer removes it, every variant included, "
                           + "and the same-origin URLs its Location and Content-Location name")
        }
        if let entry, policy == .twoTier {
            let directives = CacheControl(entry.header("Cache-Control"))
            if directives.has("max-age") || entry.header("Expires") != nil {
                reasons.append("under two-tier the windows decide freshness: the response's max-age and Expires are not used (the http policy follows them)")
            }
        }
        let lastNotStored = entry == nil ? cache.lastNotStored(key).map {
            NotStored(reason: $0.reason.description, date: HTTPDate.format($0.date))
        } : nil

        return CacheExplanation(
            method: method, url: request.url?.absoluteString ?? "",
            key: Key(method: key.method, url: key.url, credentialPartition: key.partition != nil || storeUnavailable && credentialed,
                     namespace: key.namespace.isEmpty ? nil : key.namespace),
            policy: policy.name, policySource: policySource(request, configuration: configuration),
            windows: Windows(fresh: windows.fresh, usable: windows.usable, source: windowsSource),
            entry: described, otherVariantsStored: otherVariant == true && entry == nil,
            lastNotStored: lastNotStored, outcome: outcome, reasons: reasons)
    }

    private static func policySource(_ request: URLRequest, configuration: CacheConfiguration) -> String {
        if request.value(forHTTPHeaderField: HTTPCachingHeaders.policy) != nil { return "the request's cachingPolicy" }
        switch request.cachePolicy {
        case .returnCacheDataElseLoad: return "URLRequest.cachePolicy .returnCacheDataElseLoad"
        case .returnCacheDataDontLoad: return "URLRequest.cachePolicy .returnCacheDataDontLoad"
        default: return "the configuration"
        }
    }

    private static func describe(_ entry: CacheEntry, policy: CachingPolicy, windows: CacheWindows, evaluation: CacheDecision.Evaluation,
                                 credentialed: Bool, request: URLRequest, cache: CacheEngine, now: Date) -> Entry {
        let resident = entry.age(at: now)
        let age: TimeInterval, ageSource: String
        if policy == .httpSemantics {
            let initial = Freshness.initialAge(header: entry.header, receivedAt: entry.storedAt)
            age = Freshness.currentAge(of: entry, at: now)
            ageSource = initial > 0
                ? "\(seconds(resident)) since stored, plus \(seconds(initial)) it already had when it arrived (its Age and Date fields)"
                : "\(seconds(resident)) since stored"
        } else {
            age = resident
            ageSource = "\(seconds(resident)) since stored"
        }
        var lifetime = evaluation.lifetime, lifetimeSource = evaluation.lifetimeSource?.rawValue
        if lifetime == nil {
            switch policy {
            case .twoTier, .cacheFirst, .cacheOnly:
                lifetime = windows.fresh
                lifetimeSource = Freshness.Source.windows.rawValue
            case .httpSemantics:
                let computed = Freshness.lifetimeAndSource(statusCode: entry.statusCode, header: entry.header, storedAt: entry.storedAt)
                lifetime = computed.lifetime
                lifetimeSource = computed.source.rawValue
            default:
                break
            }
        }
        var validators: [String] = []
        if let etag = entry.header("ETag") { validators.append("ETag \(etag)") }
        if let lastModified = entry.header("Last-Modified") { validators.append("Last-Modified \(lastModified)") }
        let vary = Vary.names(entry.header("Vary"))
        let variants = Vary.variantList(of: entry)
        let (storable, storage) = storability(of: entry, policy: policy, credentialed: credentialed, cache: cache)
        return Entry(statusCode: entry.statusCode, storedAt: HTTPDate.format(entry.storedAt), bodyBytes: entry.body.count,
                     age: age, ageSource: ageSource, lifetime: lifetime, lifetimeSource: lifetimeSource,
                     ttl: lifetime.map { $0 - age }, cacheControl: entry.header("Cache-Control"), validators: validators,
                     vary: vary, variantsStored: vary.isEmpty ? nil : max(variants.count, 1),
                     storable: storable, storage: storage)
    }

    /// Whether a stored response would be stored as it is under the configuration in force,
    /// and why.
    private static func storability(of entry: CacheEntry, policy: CachingPolicy, credentialed: Bool,
                                    cache: CacheEngine) -> (Bool, String) {
        let configuration = cache.configuration
        let head = ResponseHead(statusCode: entry.statusCode, headers: entry.headers, url: entry.url)
        if let reason = Storability.reasonNotToStore(method: "GET", response: head, policy: policy, credentialed: credentialed,
                                                     configuration: configuration) {
            return (false, reason.description)
        }
        if entry.byteCount > cache.store.maxEntrySize {
            return (false, NotStoredReason.tooLarge(bytes: entry.byteCount, limit: cache.store.maxEntrySize).description)
        }
        let directives = CacheControl(entry.header("Cache-Control"))
        var parts: [String] = []
        if policy == .httpSemantics {
            if Freshness.isExplicitlyCacheable(header: entry.header) {
                parts.append("status \(entry.statusCode) with explicit freshness (max-age, Expires, public or private)")
            } else {
                parts.append("status \(entry.statusCode) may be stored without explicit freshness (RFC 9110 section 15.1)")
            }
        } else {
            parts.append("status \(entry.statusCode) is in storableStatusCodes")
        }
        if directives.has("must-understand") {
            parts.append("must-understand with a status the cache understands" + (directives.has("no-store") ? ", so no-store is set aside" : ""))
        }
        if directives.has("private") { parts.append("private is allowed in a private cache") }
        if entry.header("Set-Cookie") != nil { parts.append("it sets a cookie, kept because storesResponsesSettingCookies is true") }
        if credentialed { parts.append("the request carries credentials: stored in a partition of their own") }
        parts.append("\(entry.byteCount) bytes, within the store's entry limit")
        return (true, parts.joined(separator: "; "))
    }

    private static func outcome(_ evaluation: CacheDecision.Evaluation, method: String, entry: CacheEntry?, windows: CacheWindows,
                                policy: CachingPolicy, configuration: CacheConfiguration, cache: CacheEngine,
                                reasons: inout [String]) -> Outcome {
        let name = configuration.cacheName
        let lifetime = evaluation.lifetime ?? windows.fresh
        let age = evaluation.age ?? 0
        switch evaluation.action {
        case .serve(let plan):
            let disposition = Disposition(status: plan.status, hit: true, ttl: plan.ttl, age: plan.age)
            let form: String
            switch plan.form {
            case .whole: form = ""
            case .headersOnly: form = " (status and fields only: a HEAD)"
            case .range(let bytes): form = " (206, bytes \(bytes.lowerBound)-\(bytes.upperBound))"
            case .rangeNotSatisfiable: form = " (416: the range lies outside the stored body)"
            }
            let summary: String, network: String
            switch (plan.status, plan.refresh) {
            case (.fresh, _):
                summary = "fresh: served from the store\(form)"
                network = "none"
                if policy != .cacheFirst && policy != .cacheOnly {
                    reasons.append("age \(seconds(age)) is below the lifetime \(seconds(lifetime))")
                }
            case (_, true):
                summary = "stale: served from the store at once\(form), then refreshed in the background"
                network = "a background refresh" + (entry.map { Validation.hasValidator($0) ? ", conditional on its validators" : "" } ?? "")
                reasons.append("age \(seconds(age)) is past the lifetime \(seconds(lifetime)) but within the stale limit"
                               + (policy == .httpSemantics ? " (stale-while-revalidate, or the request's max-stale)" : " (the usable window \(seconds(windows.usable)), or the request's max-stale)"))
            default:
                summary = "stale: served from the store whatever its age\(form), not refreshed"
                network = "none"
            }
            if let entry, CacheControl(entry.header("Cache-Control")).has("immutable"), evaluation.verdict == .fresh {
                reasons.append("immutable (RFC 8246): a fresh entry is not revalidated, even on a revalidating reload")
            }
            return Outcome(action: "serve", cacheStatus: plan.status.rawValue, network: network, forwardReason: nil,
                           cacheStatusField: CacheStatusField.member(disposition, cacheName: name), stores: false,
                           fallback: false, summary: summary)
        case .forward(let plan):
            let disposition = Disposition(status: plan.status, forward: plan.reason)
            var network = plan.validate ? "a conditional request ("
                + (entry.map { Validation.conditionalHeaders(for: $0).keys.sorted().joined(separator: ", ") } ?? "") + ")" : "a request"
            if plan.passThrough { network += ", passed through untouched" }
            var summary: String
            switch plan.reason {
            case .uriMiss, .varyMiss, .miss: summary = "miss: fetched from the origin"
            case .method: summary = "bypass: \(method) goes to the origin"
            case .bypass: summary = "bypass: passed to the origin untouched"
            case .request: summary = "expired: the request's own directives send it to the origin"
            case .stale: summary = "expired: fetched again"
            }
            if plan.validate { summary += "; a 304 serves the stored body as revalidated" }
            if let entry {
                if plan.reason == .stale {
                    if CacheControl(entry.header("Cache-Control")).has("no-cache") && (policy == .httpSemantics || configuration.honorsOriginDirectives) {
                        reasons.append("the response says no-cache: revalidated before each use")
                    } else {
                        reasons.append("age \(seconds(age)) is past the lifetime \(seconds(lifetime))"
                                       + (policy == .twoTier ? " and past what may be served stale" : ""))
                    }
                }
                if plan.reason == .request { reasons.append("the entry could answer, but the request's Cache-Control, Pragma or URLRequest.cachePolicy asks for the origin") }
                let directives = CacheControl(entry.header("Cache-Control"))
                if !plan.passThrough, evaluation.verdict == .revalidate || plan.reason == .stale, !plan.validate {
                    reasons.append("no validator (ETag or Last-Modified): the whole response is fetched again")
                }
                if plan.fallback {
                    reasons.append("if the network fails or the origin answers 5xx, the stored entry is served instead (fallback)")
                } else if !plan.passThrough && plan.reason != .method {
                    if configuration.errorFallbackWindow == nil {
                        reasons.append("no fallback: errorFallbackWindow is off")
                    } else if entry.statusCode >= 500 {
                        reasons.append("no fallback: the stored response is itself an error")
                    } else if (directives.has("must-revalidate") || directives.has("no-cache")
                               || (policy == .twoTier && directives.has("proxy-revalidate")))
                                && (policy != .twoTier || configuration.honorsOriginDirectives) {
                        reasons.append("no fallback: the response says must-revalidate, proxy-revalidate or no-cache")
                    } else {
                        reasons.append("no fallback: the entry is past the error window")
                    }
                }
                if plan.discardEntry { reasons.append("the entry is of no more use (past every window, nothing to validate it with): removed before the request") }
                if plan.passThrough && (method == "HEAD" || plan.status == .bypass) && plan.reason != .bypass {
                    reasons.append("a HEAD or a range is answered from the store only from a fresh, complete entry")
                }
            }
            if !plan.store && !plan.passThrough && plan.reason != .bypass { reasons.append("the answer is not stored (the request says no-store)") }
            return Outcome(action: "forward", cacheStatus: plan.status.rawValue, network: network, forwardReason: plan.reason.rawValue,
                           cacheStatusField: CacheStatusField.member(disposition, cacheName: name), stores: plan.store && !plan.passThrough,
                           fallback: plan.fallback, summary: summary)
        case .fail(let error):
            let text = error.errorDescription ?? "\(error)"
            return Outcome(action: "fail", cacheStatus: CacheStatus.miss.rawValue, network: "none",
                           forwardReason: nil, cacheStatusField: "none (the request fails)", stores: false, fallback: false,
                           summary: "fails: \(text)")
        }
    }
}

extension HTTPCache {
    /// Explains, without touching the network, what the cache would do with a request and
    /// why (keyed without any session's own headers; see `CacheInstallation.explain(_:)`).
    ///
    /// Reads the store as a lookup would (which counts as a use for eviction), then weighs
    /// the entry as a request would: the key (a credential partition shown as present, never
    /// its value), the entry found or not, its age and lifetime with the field each comes
    /// from, the policy and windows in force, whether the stored response would still be
    /// stored and why, and what would happen.
    public func explain(_ request: URLRequest) -> CacheExplanation {
        CacheExplanation.make(request: request, keys: plainKeys, cache: engine)
    }
}

extension CacheInstallation {
    /// Explains, without touching the network, what these sessions' cache would do with a
    /// request and why, keying it as the sessions do (their `httpAdditionalHeaders`
    /// included). See `HTTPCache.explain(_:)`.
    public func explain(_ request: URLRequest) -> CacheExplanation {
        CacheExplanation.make(request: request, keys: binding.keys, cache: binding.engine)
    }
}
