import Foundation

/// How the cache keys what `No-Vary-Search` makes reusable.
///
/// A response whose field gives a non-default config `c` for a request keyed `K` is stored
/// under `c.entryKey(for: K)`: `K` with its URL replaced by `c.normalized(K.url)` and marked
/// with the fragment `#no-vary-search`, which no key of a request has (keys are normalized
/// without fragments; a keyed body's is `#body=`). So an entry stored under a config is never
/// found by an exact lookup, only through the config, and entries stored without the field
/// are never confused with it. The configs stored for a URL are listed, newest first, in an
/// index entry keyed by the URL without its query (`indexKey(for:)`); a lookup that misses
/// its exact key tries the key of each listed config, and accepts the entry found only if
/// its own field parses to that config.
extension NoVarySearch {
    /// The response field.
    static let fieldName = "No-Vary-Search"
    /// The fragment marking the key of an entry stored under its `No-Vary-Search`.
    static let entryKeyMarker = "#no-vary-search"
    /// The variant of an index's key: no `Vary` variant has it (those are hex digests).
    static let indexVariant = "@no-vary-search"
    /// The most configs an index lists: past it, the oldest falls off, and the entries stored
    /// under it are found no more (they age out of the store as any entry does).
    static let maxConfigsPerURL = 8
    /// The `detail` of a `Cache-Status` member (RFC 9211) when an entry stored for another URL
    /// answered through its `No-Vary-Search`.
    static let statusDetail = "no-vary-search"

    /// The config a response declares as the cache reads it: the field, in the latest draft's
    /// syntax or the older boolean `params` browsers still send; nil when it changes nothing.
    static func declared(by header: (String) -> String?) -> NoVarySearch? {
        NoVarySearch(fieldValue: header(fieldName), acceptingLegacySyntax: true)
    }

    /// Whether entries for a key can be stored and found through `No-Vary-Search`: a GET keyed
    /// by its URL alone (not a keyed body, not already an entry key of this kind).
    static func applies(to key: CacheKey) -> Bool {
        key.method == "GET" && key.variant == nil && !key.url.utf8.contains(UInt8(ascii: "#"))
    }

    /// Whether a key is that of an entry stored under its `No-Vary-Search`.
    static func isEntryKey(_ key: CacheKey) -> Bool {
        key.url.hasSuffix(entryKeyMarker)
    }

    /// The key a response with this config, answering a request keyed `key`, is stored under:
    /// the URL normalized (`normalized(_:)`) and marked; nil when the key's URL does not parse.
    func entryKey(for key: CacheKey) -> CacheKey? {
        guard let url = URL(string: key.url) else { return nil }
        var stored = key.primary
        stored.url = normalized(url).absoluteString + Self.entryKeyMarker
        return stored
    }

    /// The key of the index listing the configs stored for the URL of `key` without its query
    /// (an entry key's marker dropped too); nil when the URL does not parse.
    static func indexKey(for key: CacheKey) -> CacheKey? {
        guard let base = normalizedBase(key.url) ?? parsedBase(key.url) else { return nil }
        var index = key.primary
        index.url = base
        index.variant = indexVariant
        return index
    }

    /// A URL without its query, parsed and normalized (`components(of:)`); nil when it does not parse.
    static func parsedBase(_ url: String) -> String? {
        URL(string: url).flatMap(components(of:)).flatMap(base(of:))
    }

    /// The same for a URL already in normal form (`CacheKey.isNormalized`, as most keys' are),
    /// without parsing it: the text before its `?`. Every miss asks for its URL's index, and
    /// parsing was most of what that cost. Nil for any other URL.
    static func normalizedBase(_ url: String) -> String? {
        guard CacheKey.isNormalized(url) else { return nil }
        guard let query = url.utf8.firstIndex(of: UInt8(ascii: "?")) else { return url }
        return String(url[..<query])
    }

    /// Whether an entry reached through its `No-Vary-Search` answers a request for another URL
    /// than the one it was stored for (what `Cache-Status` and the statistics report): false
    /// for an exact hit, and for the URL it was stored for.
    static func answersAnotherURL(_ entry: CacheEntry, requestKey: CacheKey, requestURL: URL?) -> Bool {
        guard entry.key.url != requestKey.url, isEntryKey(entry.key), let requestURL else { return false }
        return CacheKey.normalize(entry.url) != CacheKey.normalize(requestURL)
    }
}

// MARK: - The field in canonical form, and the index

extension NoVarySearch {
    /// The config as a field value in the latest draft's syntax, which parses back to it:
    /// `params=(...)` or `except=(...)`, then `key-order`; in each name, what a String item
    /// cannot hold or the draft would decode (`%`, `+`, `"`, `\`, space, control and non-ASCII
    /// characters) percent-encoded. Empty for the default config.
    var fieldValue: String {
        let list = "(" + params.names.map { "\"" + Self.percentEncoded($0) + "\"" }.joined(separator: " ") + ")"
        var members: [String] = []
        if params.keepsNames {
            members.append("except=" + list)
        } else if !params.names.isEmpty {
            members.append("params=" + list)
        }
        if !varyOnKeyOrder { members.append("key-order") }
        return members.joined(separator: ", ")
    }

    /// Printable ASCII but `%`, `+`, `"` and `\`: a name's characters written as they are.
    private static let unreserved = CharacterSet(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7E))
        .subtracting(CharacterSet(charactersIn: "%+\"\\"))

    /// A name with every UTF-8 byte outside `unreserved` as `%XX`.
    private static func percentEncoded(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// An index's body: the configs' field values, one a line, newest first.
    static func indexBody(_ configs: [NoVarySearch]) -> Data {
        Data(configs.map(\.fieldValue).joined(separator: "\n").utf8)
    }

    /// The configs an index's body lists; nil when it is not one (a line that does not parse
    /// to a config, none, or more than `maxConfigsPerURL`).
    static func configs(inIndexBody body: Data) -> [NoVarySearch]? {
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let configs = lines.compactMap { NoVarySearch(fieldValue: String($0)) }
        guard !configs.isEmpty, configs.count == lines.count, configs.count <= maxConfigsPerURL else { return nil }
        return configs
    }
}
