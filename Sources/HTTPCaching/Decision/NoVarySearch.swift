import Foundation

/// A `No-Vary-Search` response field (draft-ietf-httpbis-no-vary-search, a "URL variation
/// config"): which query parameters, and whether their order, a cache may ignore when it
/// matches a request's URL to a stored response's. Names are kept sorted, once each; names
/// and values are compared by UTF-16 code units, never by Unicode canonical equivalence, as
/// the draft requires (`é`, U+00E9, and `e` + U+0301 differ).
struct NoVarySearch: Sendable, Hashable {
    /// Which query parameters take part in a comparison.
    enum Params: Sendable, Hashable {
        /// The draft's no-vary params list (vary params the wildcard): these names are
        /// dropped, the rest compared. An empty list drops none.
        case ignoring([String])
        /// The draft's vary params list (no-vary params the wildcard): only these names are
        /// compared. An empty list drops every parameter.
        case ignoringAllExcept([String])

        /// The names listed.
        var names: [String] { switch self { case .ignoring(let names), .ignoringAllExcept(let names): names } }
        /// Whether the names listed are the ones kept (`ignoringAllExcept`), not the ones dropped.
        var keepsNames: Bool { if case .ignoringAllExcept = self { true } else { false } }
        /// Equal when the same case holds the same names, compared by UTF-16 code units.
        static func == (lhs: Params, rhs: Params) -> Bool { lhs.codeUnits == rhs.codeUnits }
        /// Hashes what `==` compares.
        func hash(into hasher: inout Hasher) { hasher.combine(codeUnits) }
        /// The case as a tag (`[0]` or `[1]`), then each name's UTF-16 code units.
        private var codeUnits: [[UInt16]] { [[keepsNames ? 1 : 0]] + names.map { Array($0.utf16) } }
    }

    /// Which query parameters are compared.
    let params: Params
    /// Whether the order of the parameters' keys matters (the draft's "vary on key order").
    let varyOnKeyOrder: Bool

    /// The default URL variation config: no parameter ignored and key order significant.
    static let `default` = NoVarySearch(params: .ignoring([]), varyOnKeyOrder: true)

    /// A config from its parts, by default every parameter compared in order; the names are
    /// sorted by code units and de-duplicated.
    init(params: Params = .ignoring([]), varyOnKeyOrder: Bool = true) {
        let names = Self.canonical(params.names)
        self.params = params.keepsNames ? .ignoringAllExcept(names) : .ignoring(names)
        self.varyOnKeyOrder = varyOnKeyOrder
    }

    /// Reads a field value ("Obtain a URL variation config"): a strict RFC 9651 Dictionary
    /// (after trimming the spaces and tabs an HTTP field value excludes), whose failure means
    /// the default config. Other members, and parameters on members and items, are ignored.
    /// - Parameters:
    ///   - fieldValue: the field's lines joined with `, `; nil when the response has none.
    ///   - acceptingLegacySyntax: where the latest draft gives the default config, also read
    ///     the boolean `params` of drafts -00 to -03 (`params`, `params, except=("x")`) that
    ///     Chrome, Firefox and the web-platform-tests use. By default, only the latest draft.
    /// - Returns: nil for the default config: the field absent, not a Dictionary, invalid,
    ///   or changing nothing (`params=()`).
    init?(fieldValue: String?, acceptingLegacySyntax: Bool = false) {
        guard let fieldValue, let dictionary = DictionaryParser.parse(fieldValue) else { return nil }
        let config = Self.variationConfig(dictionary, legacy: acceptingLegacySyntax)
        guard !config.isDefault else { return nil }
        self = config
    }

    /// Whether this is the default config (only identical queries are equivalent).
    var isDefault: Bool { varyOnKeyOrder && params == .ignoring([]) }

    /// Whether two URLs are "equivalent modulo variation config" under this config.
    ///
    /// Scheme, host, port and path must be equal (as `components(of:)` writes them); userinfo
    /// and fragment are not compared. Under the default config the queries must be identical
    /// (none differs from empty); otherwise both are parsed as form data, filtered, stably
    /// sorted by key if key order does not matter, and compared pair by pair.
    func equivalent(_ a: URL, _ b: URL) -> Bool {
        guard let partsA = Self.components(of: a), let partsB = Self.components(of: b) else { return a == b }
        guard Self.base(of: partsA) == Self.base(of: partsB) else { return false } // ASCII: `==` is by code units
        if isDefault { return partsA.percentEncodedQuery == partsB.percentEncodedQuery }
        // Same size, then pair by pair, name and value by code units: as one flat list.
        let flat = { (pairs: [(name: String, value: String)]) in pairs.flatMap { [Array($0.name.utf16), Array($0.value.utf16)] } }
        return flat(significantPairs(of: partsA.percentEncodedQuery)) == flat(significantPairs(of: partsB.percentEncodedQuery))
    }

    /// The query in canonical form: URLs with equal scheme, host, port and path are equivalent
    /// exactly when these are equal. Under the default config, the query as it is (nil when
    /// there is none); otherwise the pairs that count, in comparison order, re-encoded by the
    /// form serializer (`name=value`, a space as `+`), and empty, never nil, when none count.
    func normalizedQuery(of url: URL) -> String? {
        let query = Self.components(of: url)?.percentEncodedQuery
        return isDefault ? query : Self.serialized(significantPairs(of: query))
    }

    /// The URL to store a response under for this config: `components(of:)` with the
    /// normalized query, or none when that is empty under a non-default config.
    func normalized(_ url: URL) -> URL {
        guard var parts = Self.components(of: url) else { return url }
        if !isDefault { parts.percentEncodedQuery = normalizedQuery(of: url).flatMap { $0.isEmpty ? nil : $0 } }
        return parts.url ?? url
    }

    /// The pairs of a query that take part in a comparison, in comparison order: filtered,
    /// then, if key order does not matter, stably sorted by key code units.
    private func significantPairs(of query: String?) -> [(name: String, value: String)] {
        let listed = Set(params.names.map { Array($0.utf16) })
        let pairs = (query.map(Self.formURLDecodedPairs) ?? []).filter { listed.contains(Array($0.name.utf16)) == params.keepsNames }
        guard !varyOnKeyOrder else { return pairs }
        let keyed = pairs.enumerated().map { (key: Array($0.element.name.utf16), offset: $0.offset, pair: $0.element) }
        return keyed.sorted { $0.key == $1.key ? $0.offset < $1.offset : $0.key.lexicographicallyPrecedes($1.key) }.map(\.pair)
    }
}

// MARK: - Parsing a URL variation config

extension NoVarySearch {
    /// "Parse a URL variation config" of the latest draft, given the parsed dictionary; with
    /// `legacy`, a boolean `params` is read as drafts -00 to -03 did: true ignores every
    /// parameter but those of `except` (if any), false none (and `except` is then invalid).
    static func variationConfig(_ value: [String: Member], legacy: Bool = false) -> NoVarySearch {
        guard let varyOnKeyOrder = varyOnKeyOrder(value) else { return .default }
        var (params, except) = (value["params"], value["except"])
        if legacy, case .item(.boolean(let ignoresAll))? = params {
            guard ignoresAll || except == nil else { return .default }
            (params, except) = (nil, ignoresAll ? except ?? .innerList([]) : nil)
        }
        if params != nil && except != nil { return .default }
        guard let list = params ?? except else { return NoVarySearch(varyOnKeyOrder: varyOnKeyOrder) }
        guard let names = keys(list) else { return .default }
        return NoVarySearch(params: except == nil ? .ignoring(names) : .ignoringAllExcept(names), varyOnKeyOrder: varyOnKeyOrder)
    }

    /// The negation of `key-order`: true when absent, nil when it is not a boolean.
    private static func varyOnKeyOrder(_ value: [String: Member]) -> Bool? {
        guard let member = value["key-order"] else { return true }
        guard case .item(.boolean(let ignoresOrder)) = member else { return nil }
        return !ignoresOrder
    }

    /// The names of an inner list of strings, each through "parse a key"; nil for anything else.
    private static func keys(_ member: Member) -> [String]? {
        guard case .innerList(let items) = member else { return nil }
        let strings = items.compactMap { item in if case .string(let string) = item { string } else { nil } }
        return strings.count == items.count ? strings.map { formURLDecoded(ArraySlice($0.utf8)) } : nil
    }

    /// Names sorted by UTF-16 code units, each once.
    private static func canonical(_ names: [String]) -> [String] {
        var seen = Set<[UInt16]>()
        return names.map { Array($0.utf16) }.sorted { $0.lexicographicallyPrecedes($1) }
            .filter { seen.insert($0).inserted }.map { String(decoding: $0, as: UTF16.self) }
    }
}

// MARK: - URLs and application/x-www-form-urlencoded

extension NoVarySearch {
    /// A URL's components as compared: scheme and host in lower case, no userinfo, default
    /// port (80 for http, 443 for https) or fragment, and an empty path written as `/`.
    static func components(of url: URL) -> URLComponents? {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return nil }
        let scheme = parts.scheme?.lowercased()
        parts.scheme = scheme
        (parts.percentEncodedUser, parts.percentEncodedPassword) = (nil, nil)
        if let host = parts.percentEncodedHost { parts.percentEncodedHost = host.lowercased() }
        if (scheme == "http" && parts.port == 80) || (scheme == "https" && parts.port == 443) { parts.port = nil }
        if parts.percentEncodedPath.isEmpty && parts.percentEncodedHost != nil { parts.percentEncodedPath = "/" }
        parts.fragment = nil
        return parts
    }

    /// Scheme, host, port and path as one string.
    static func base(of parts: URLComponents) -> String? {
        var base = parts
        base.percentEncodedQuery = nil
        return base.string
    }

    /// The URL Standard's `application/x-www-form-urlencoded` parser: split on `&`, skip
    /// empty pieces, split each on its first `=` (none: an empty value), decode both.
    static func formURLDecodedPairs(_ query: String) -> [(name: String, value: String)] {
        Array(query.utf8).split(separator: UInt8(ascii: "&")).map { piece in
            guard let equals = piece.firstIndex(of: UInt8(ascii: "=")) else { return (formURLDecoded(piece), "") }
            return (formURLDecoded(piece[..<equals]), formURLDecoded(piece[(equals + 1)...]))
        }
    }

    /// `+` as a space, percent-decoding (a `%` without two hex digits stays), then UTF-8
    /// decoding without BOM, each bad sequence becoming U+FFFD as the Encoding Standard says.
    static func formURLDecoded(_ bytes: ArraySlice<UInt8>) -> String {
        let hex = { (byte: UInt8) in UInt8(String(Unicode.Scalar(byte)), radix: 16) }
        var output: [UInt8] = []
        var rest = bytes
        while let byte = rest.popFirst() {
            if byte == UInt8(ascii: "%"), rest.count >= 2, let high = hex(rest[rest.startIndex]),
               let low = hex(rest[rest.startIndex + 1]) {
                output.append(high << 4 | low)
                rest = rest.dropFirst(2)
            } else {
                output.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// What the form serializer keeps: ASCII letters and digits, `*-._`, and the space (then `+`).
    private static let formSafe = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._ ")

    /// The URL Standard's `application/x-www-form-urlencoded` serializer: UTF-8, a space as
    /// `+`, every other byte but those of `formSafe` percent-encoded in upper case.
    private static func serialized(_ pairs: [(name: String, value: String)]) -> String {
        let encode = { (text: String) in
            (text.addingPercentEncoding(withAllowedCharacters: formSafe) ?? "").replacingOccurrences(of: " ", with: "+")
        }
        return pairs.map { encode($0.name) + "=" + encode($0.value) }.joined(separator: "&")
    }
}

// MARK: - Structured Field Dictionary (RFC 9651)

extension NoVarySearch {
    /// A bare item (RFC 9651 §3.3): strings and booleans keep their value, the rest only parse.
    enum BareItem: Equatable, Sendable { case string(String), boolean(Bool), other }
    /// A dictionary member's value, its parameters dropped.
    enum Member: Equatable, Sendable { case item(BareItem), innerList([BareItem]) }

    /// A strict parser of a Dictionary field value (RFC 9651 §4.2), every item type included.
    struct DictionaryParser {
        private struct Invalid: Error {}
        private var input: ArraySlice<UInt8>
        /// The characters of keys, of tokens (tchar, `:`, `/`), of base64 and of lower-case hex.
        private static let letters = "abcdefghijklmnopqrstuvwxyz", digits = "0123456789"
        private static let keyCharacters = Set((letters + digits + "_-.*").utf8)
        private static let tokenCharacters = Set((letters + letters.uppercased() + digits + "!#$%&'*+-.^_`|~:/").utf8)
        private static let base64Characters = Set((letters + letters.uppercased() + digits + "+/").utf8)
        private static let lowerHex = Set((digits + "abcdef").utf8)

        /// The members (a repeated key's last value wins); nil when the text is not a
        /// Dictionary (non-ASCII included). An empty text is an empty Dictionary.
        static func parse(_ text: String) -> [String: Member]? {
            guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
            var parser = DictionaryParser(input: Array(text.utf8)[...])
            while parser.consume(" ") || parser.consume("\t") {}
            return try? parser.dictionary()
        }

        /// The next character, nil at the end.
        private var peek: Unicode.Scalar? { input.first.map(Unicode.Scalar.init) }

        /// Consumes the next character if it is `char`.
        private mutating func consume(_ char: Unicode.Scalar) -> Bool {
            peek == char ? input.popFirst() != nil : false
        }

        /// Consumes the next character.
        /// - Throws: `Invalid` at the end.
        private mutating func next() throws -> Unicode.Scalar {
            guard let byte = input.popFirst() else { throw Invalid() }
            return Unicode.Scalar(byte)
        }

        /// Members (`key[=value]`) separated by commas with optional whitespace around them.
        /// - Throws: `Invalid` when the input is not a Dictionary.
        private mutating func dictionary() throws -> [String: Member] {
            var members: [String: Member] = [:]
            while !input.isEmpty {
                let name = try key()
                members[name] = try member()
                while consume(" ") || consume("\t") {}
                if input.isEmpty { break }
                guard consume(",") else { throw Invalid() }
                while consume(" ") || consume("\t") {}
                if input.isEmpty { throw Invalid() } // a trailing comma
            }
            return members
        }

        /// What follows a key: `=` and an item or inner list (`(a b)`), or else true; parameters.
        /// - Throws: `Invalid` when it is neither.
        private mutating func member() throws -> Member {
            if !consume("=") {
                try parameters()
                return .item(.boolean(true))
            }
            guard consume("(") else {
                let item = try bareItem()
                try parameters()
                return .item(item)
            }
            var items: [BareItem] = []
            while true {
                while consume(" ") {}
                if consume(")") {
                    try parameters()
                    return .innerList(items)
                }
                items.append(try bareItem())
                try parameters()
                guard peek == " " || peek == ")" else { throw Invalid() }
            }
        }

        /// Parameters (`;key[=item]`...), parsed and dropped.
        /// - Throws: `Invalid` for a bad key or value.
        private mutating func parameters() throws {
            while consume(";") {
                while consume(" ") {}
                _ = try key()
                if consume("=") { _ = try bareItem() }
            }
        }

        /// A key: a lower-case letter or `*`, then lower-case letters, digits and `_-.*`.
        /// - Throws: `Invalid` when none starts here.
        private mutating func key() throws -> String {
            guard let first = peek, ("a"..."z").contains(first) || first == "*" else { throw Invalid() }
            let name = input.prefix { Self.keyCharacters.contains($0) }
            input = input.dropFirst(name.count)
            return String(decoding: name, as: UTF8.self)
        }

        /// A bare item: Integer, Decimal, String, Token, Byte Sequence, Boolean, Date or
        /// Display String.
        /// - Throws: `Invalid` when none starts here or it is malformed.
        private mutating func bareItem() throws -> BareItem {
            guard let first = peek else { throw Invalid() }
            switch first {
            case "-", "0"..."9": _ = try number()
            case "\"": return .string(try quoted(display: false))
            case "*", "a"..."z", "A"..."Z": input = input.drop { Self.tokenCharacters.contains($0) }
            case ":": try byteSequence()
            case "?":
                input.removeFirst()
                if consume("0") { return .boolean(false) }
                guard consume("1") else { throw Invalid() }
                return .boolean(true)
            case "@": // a Date: an Integer
                input.removeFirst()
                guard try !number() else { throw Invalid() }
            case "%":
                input.removeFirst()
                guard peek == "\"" else { throw Invalid() }
                _ = try quoted(display: true)
            default: throw Invalid()
            }
            return .other
        }

        /// An Integer (at most 15 digits) or a Decimal (at most 12 digits, `.`, 1 to 3 digits).
        /// - Returns: whether it is a Decimal.
        /// - Throws: `Invalid` for anything else.
        private mutating func number() throws -> Bool {
            _ = consume("-")
            // Digits and points: a second point would fail the member anyway.
            let text = input.prefix { (0x30...0x39).contains($0) || $0 == UInt8(ascii: ".") }
            input = input.dropFirst(text.count)
            let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            guard let whole = parts.first, !whole.isEmpty, whole.count <= (parts.count == 1 ? 15 : 12) else { throw Invalid() }
            guard parts.count > 1 else { return false }
            guard parts.count == 2, (1...3).contains(parts[1].count) else { throw Invalid() }
            return true
        }

        /// A String (printable ASCII in quotes, escaping only `\"` and `\\`) or, `display`, a Display
        /// String's quoted part (UTF-8 with `%xx` escapes in lower-case hex).
        /// - Throws: `Invalid` for a bad escape, a non-printable character or no closing quote.
        private mutating func quoted(display: Bool) throws -> String {
            input.removeFirst()
            var bytes: [UInt8] = []
            while true {
                let char = try next()
                guard (" "..."~").contains(char) else { throw Invalid() }
                if char == "\"" { break }
                if !display && char == "\\" {
                    let escaped = try next()
                    guard escaped == "\"" || escaped == "\\" else { throw Invalid() }
                    bytes.append(UInt8(escaped.value))
                } else if display && char == "%" {
                    let hex = String(String.UnicodeScalarView([try next(), try next()]))
                    guard hex.utf8.allSatisfy(Self.lowerHex.contains), let byte = UInt8(hex, radix: 16) else { throw Invalid() }
                    bytes.append(byte)
                } else {
                    bytes.append(UInt8(char.value))
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            guard Array(text.utf8) == bytes else { throw Invalid() } // not UTF-8
            return text
        }

        /// A Byte Sequence: base64 between colons, its padding checked leniently, as RFC 9651
        /// §4.2.7 asks of parsers.
        /// - Throws: `Invalid` for a character outside base64 or data that cannot decode.
        private mutating func byteSequence() throws {
            input.removeFirst()
            guard let end = input.firstIndex(of: UInt8(ascii: ":")) else { throw Invalid() }
            let body = input[..<end].prefix { $0 != UInt8(ascii: "=") }
            let padding = input[body.endIndex..<end]
            input = input[(end + 1)...]
            guard body.allSatisfy(Self.base64Characters.contains), padding.count <= 2, padding.allSatisfy({ $0 == UInt8(ascii: "=") }),
                  body.count % 4 != 1 else { throw Invalid() }
        }
    }
}
