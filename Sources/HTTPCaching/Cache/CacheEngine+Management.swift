import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The management calls, keyed as a session keys requests (`keys`).
extension CacheEngine {
    func cachedEntry(for request: URLRequest, keys: KeyDerivation) -> CacheEntry? {
        let headers = keys.headers(request)
        guard let key = try? keys.key(for: request, headers: headers, secret: partitionSecret) else { return nil }
        return lookup(key, headers: headers).entry
    }

    func storeResponse(_ response: HTTPURLResponse, data: Data, for request: URLRequest, windows: CacheWindows?,
                       keys: KeyDerivation) throws -> Bool {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        let head = ResponseHead(response)
        let names = Vary.names(head.header("Vary"))
        var entry = CacheEntry(key: key, url: CacheKey.removingUserinfo(response.url ?? request.url ?? URL(fileURLWithPath: "/")),
                               statusCode: response.statusCode,
                               headers: Storability.storedHeaders(of: head, keepingCookies: configuration.storesResponsesSettingCookies),
                               body: data, storedAt: now(), windows: windows ?? windowsSetAhead(for: key),
                               varyValues: Vary.values(names: names, headers: headers))
        entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: configuration)
        if usesNoVarySearch(key), let config = NoVarySearch.declared(by: entry.header), let entryKey = config.entryKey(for: key) {
            entry.key = entryKey // found as a response from the network would be: through its config
        }
        var stored = true
        if !names.isEmpty && !names.contains("*") {
            var variant = entry
            variant.key.variant = Vary.variantName(names: names, headers: headers)
            stored = try write(variant, reporting: true)
        }
        return try write(entry, reporting: true) && stored
    }

    func setWindows(_ windows: CacheWindows?, for request: URLRequest, keys: KeyDerivation) throws {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        entryWindows.withLock { $0[key] = windows }
        let throughNoVarySearch = { self.usesNoVarySearch(key) ? self.lookupThroughNoVarySearch(key, headers: headers) : nil }
        if var entry = try store.entry(for: key) ?? throughNoVarySearch() {
            entry.windows = windows
            entry.usefulUntil = CacheDecision.usefulUntil(entry, configuration: configuration)
            try store.write(entry)
        }
    }

    /// Removes what is stored for the request's URL: its entry and every variant, and what
    /// is stored for it under each `No-Vary-Search` config its URL's index lists.
    func removeEntry(for request: URLRequest, keys: KeyDerivation) throws {
        let headers = keys.headers(request)
        let key = try keys.key(for: request, headers: headers, secret: partitionSecret)
        for stored in storedKeys(for: key, headers: headers) + noVarySearchKeys(for: key, headers: headers) {
            try store.removeEntry(for: stored)
        }
    }
}
