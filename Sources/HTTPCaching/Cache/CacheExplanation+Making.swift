import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension CacheExplanation {
    /// Works out the explanation: the key, the lookup, `CacheDecision.evaluate`, and what
    /// `Storability` says of the entry. Reads the store; never the network.
    static func make(request: URLRequest, keys: KeyDerivation, cache: CacheEngine) -> CacheExplanation {
        let configuration = cache.configuration
        let now = cache.now()
        let method = request.sentMethod
        let credentialed = keys.isCredentialed(keys.headers(request))
        let keyedBody = keys.ownBodyDigest(of: request, headers: keys.headers(request)) != nil
        let found = lookUp(request, keys: keys, cache: cache)
        var reasons = found.reasons
        var decidingConfiguration = configuration
        if found.storeUnavailable { decidingConfiguration.storesCredentialedResponses = false }
        let evaluation = CacheDecision.evaluate(request: request, headers: found.headers, entry: found.entry,
                                                otherVariant: found.otherVariant, credentialed: credentialed,
                                                keyedBody: keyedBody, now: now,
                                                configuration: decidingConfiguration)
        if found.otherVariant == nil { reasons.append("the store could not be read; the lookup counts as a miss") }
        let policy = CacheDecision.policy(for: request, configuration: configuration)
        let windows = CacheDecision.windows(for: request, entry: found.entry, default: configuration.windows)
        let match = found.entry.flatMap { noVarySearchMatch($0, key: found.key, request: request) }
        let described = found.entry.map { describe($0, policy: policy, windows: windows, evaluation: evaluation,
                                                   credentialed: credentialed, request: request, cache: cache, now: now, match: match) }
        if let match, match.otherURL {
            reasons.append("the entry was stored for \(match.storedURL): its No-Vary-Search (\(match.config)) makes this URL equivalent")
        }
        reasons += evaluation.notes.map(\.text)
        let outcome = makeOutcome(evaluation, method: method, entry: found.entry, windows: windows, policy: policy,
                                  configuration: configuration, throughNoVarySearch: match?.otherURL ?? false, reasons: &reasons)
        reasons += closingReasons(found, policy: policy)
        let lastNotStored = found.entry == nil ? cache.lastNotStored(found.key).map {
            NotStored(reason: $0.reason.description, date: HTTPDate.format($0.date))
        } : nil
        return CacheExplanation(
            method: method, url: request.url?.absoluteString ?? "",
            key: Key(method: found.key.method, url: found.key.url,
                     credentialPartition: found.key.partition != nil || found.storeUnavailable && credentialed,
                     namespace: found.key.namespace.isEmpty ? nil : found.key.namespace),
            policy: policy, policySource: policySource(request, configuration: configuration),
            windows: Windows(fresh: windows.fresh, usable: windows.usable, source: windowsSource(request, entry: found.entry)),
            entry: described, otherVariantsStored: found.otherVariant == true && found.entry == nil,
            lastNotStored: lastNotStored, outcome: outcome, reasons: reasons)
    }

    /// What a lookup for the request finds (an unsafe method is keyed, and looked up, as the
    /// GET it would invalidate; the entry it finds is not one that would answer it). A request
    /// whose body is keyed is looked up under its own key.
    private struct Found {
        var headers: RequestHeaders
        var key: CacheKey
        var entry: CacheEntry?
        var invalidated: CacheEntry?
        var otherVariant: Bool? = false
        var storeUnavailable = false
        var reasons: [String] = []
    }

    private static func lookUp(_ request: URLRequest, keys: KeyDerivation, cache: CacheEngine) -> Found {
        let headers = keys.headers(request)
        let method = request.sentMethod
        let keyed = keys.ownBodyDigest(of: request, headers: headers) != nil
        let isUnsafe = !keyed && !CacheDecision.safeMethods.contains(method)
        let keyMethod = isUnsafe ? "GET" : nil
        var found: Found
        do {
            found = Found(headers: headers, key: try keys.key(for: request, headers: headers, method: keyMethod, secret: cache.partitionSecret))
            if method == "GET" || method == "HEAD" || isUnsafe || keyed {
                (found.entry, found.otherVariant) = cache.lookup(found.key, headers: headers, changing: false)
            }
        } catch {
            found = Found(headers: headers, key: keys.key(for: request, headers: headers, method: keyMethod, secret: { [] }))
            found.storeUnavailable = true
            found.reasons.append("the store's partition secret could not be read (\(error)): this credentialed request can be neither looked up nor stored")
        }
        if isUnsafe {
            found.invalidated = found.entry
            found.entry = nil
        }
        return found
    }

    private static func windowsSource(_ request: URLRequest, entry: CacheEntry?) -> String {
        if request.value(forHTTPHeaderField: HTTPCachingHeaders.windows).flatMap(CacheWindows.init(headerValue:)) != nil {
            return "the request's cacheWindows"
        }
        return entry?.windows != nil ? "the entry's own windows" : "the configuration"
    }

    /// What an unsafe method would invalidate, and what two-tier sets aside of the response.
    private static func closingReasons(_ found: Found, policy: CachingPolicy) -> [String] {
        var reasons: [String] = []
        if found.invalidated != nil {
            reasons.append("a response is stored for GET \(found.key.url): a non-error answer removes it, every variant included, "
                           + "and the same-origin URLs its Location and Content-Location name")
        }
        if let entry = found.entry, policy == .twoTier {
            let directives = CacheControl(entry.header("Cache-Control"))
            if directives.has("max-age") || entry.header("Expires") != nil {
                reasons.append("under two-tier the windows decide freshness: the response's max-age and Expires are not used (the http policy follows them)")
            }
        }
        return reasons
    }

    private static func policySource(_ request: URLRequest, configuration: CacheConfiguration) -> String {
        if request.value(forHTTPHeaderField: HTTPCachingHeaders.policy) != nil { return "the request's cachingPolicy" }
        switch request.cachePolicy {
        case .returnCacheDataElseLoad: return "URLRequest.cachePolicy .returnCacheDataElseLoad"
        case .returnCacheDataDontLoad: return "URLRequest.cachePolicy .returnCacheDataDontLoad"
        default: return "the configuration"
        }
    }

    /// What an entry stored under its response's `No-Vary-Search` says of it; nil for one
    /// stored under its own URL.
    private static func noVarySearchMatch(_ entry: CacheEntry, key: CacheKey, request: URLRequest) -> NoVarySearchMatch? {
        guard NoVarySearch.isEntryKey(entry.key), let config = NoVarySearch.declared(by: entry.header) else { return nil }
        return NoVarySearchMatch(config: config.fieldValue, storedURL: entry.url.absoluteString,
                                 otherURL: NoVarySearch.answersAnotherURL(entry, requestKey: key, requestURL: request.url))
    }

    private static func describe(_ entry: CacheEntry, policy: CachingPolicy, windows: CacheWindows, evaluation: CacheDecision.Evaluation,
                                 credentialed: Bool, request: URLRequest, cache: CacheEngine, now: Date,
                                 match: NoVarySearchMatch?) -> Entry {
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
        let variants = vary.isEmpty ? [] : cache.variantNames(of: entry.key)
        let (storable, storage) = storability(of: entry, policy: policy, credentialed: credentialed, cache: cache)
        return Entry(statusCode: entry.statusCode, storedAt: HTTPDate.format(entry.storedAt), bodyBytes: entry.body.count,
                     age: age, ageSource: ageSource, lifetime: lifetime, lifetimeSource: lifetimeSource,
                     ttl: lifetime.map { $0 - age }, cacheControl: entry.header("Cache-Control"), validators: validators,
                     vary: vary, variantsStored: vary.isEmpty ? nil : max(variants.count, 1),
                     storable: storable, storage: storage, noVarySearch: match,
                     partialContent: entry.partialContent.map(describe))
    }

    /// What a partial entry holds, in words: its spans as inclusive byte positions.
    static func describe(_ parts: PartialContent) -> String {
        let spans = parts.spans.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ", ")
        return "bytes \(spans) of \(parts.completeLength) (\(parts.storedBytes) bytes in \(parts.spans.count) span"
            + (parts.spans.count == 1 ? ")" : "s)")
    }

    /// Whether a stored response would be stored as it is under the configuration in force,
    /// and why.
    private static func storability(of entry: CacheEntry, policy: CachingPolicy, credentialed: Bool,
                                    cache: CacheEngine) -> (Bool, String) {
        let configuration = cache.configuration
        let partial = entry.partialContent != nil
        if partial && !configuration.storesPartialContent {
            return (false, "it is a part, and storesPartialContent is false: 206 answers pass through")
        }
        // A part is stored as its representation, a 200, would be.
        let head = ResponseHead(statusCode: partial ? 200 : entry.statusCode, headers: entry.headers, url: entry.url)
        if let reason = Storability.reasonNotToStore(method: "GET", response: head, policy: policy, credentialed: credentialed,
                                                     configuration: configuration) {
            return (false, reason.description)
        }
        if entry.byteCount > cache.store.maxEntrySize {
            return (false, NotStoredReason.tooLarge(bytes: entry.byteCount, limit: cache.store.maxEntrySize).description)
        }
        let directives = CacheControl(entry.header("Cache-Control"))
        var parts: [String] = []
        if partial {
            parts.append("a part of a 200 (storesPartialContent), combined with later parts that share its strong validator")
        } else if policy == .httpSemantics {
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
}

extension CacheInstallation {
    /// Explains, without touching the network, what these sessions' cache would do with a
    /// request and why, keying it as the sessions do (their `httpAdditionalHeaders` included)
    /// and with their `requestCachePolicy` where the request asks for the protocol's.
    ///
    /// Reads the store as a lookup would (which counts as a use for eviction), then weighs
    /// the entry as a request would: the key (a credential partition shown as present, never
    /// its value), the entry found or not, its age and lifetime with the field each comes
    /// from, the policy and windows in force, whether the stored response would still be
    /// stored and why, and what would happen.
    public func explain(_ request: URLRequest) -> CacheExplanation {
        CacheExplanation.make(request: binding.withSessionPolicy(request), keys: binding.keys, cache: binding.engine)
    }
}
