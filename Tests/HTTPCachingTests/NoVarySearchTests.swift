import Foundation
import Testing
@testable import HTTPCaching

/// `No-Vary-Search`: parsing (draft-ietf-httpbis-no-vary-search, "Parse a URL variation
/// config", over an RFC 9651 Dictionary), "equivalent modulo variation config", and the
/// normalized forms a cache stores entries under.
///
/// Sources of the rows: the draft's examples (its Introduction, the Examples of "Obtain a URL
/// variation config", "Parse a key" and "Comparing"), the web-platform-tests
/// `speculation-rules/prefetch/no-vary-search/test-inputs.js` and
/// `fetch/http-cache/no-vary-search.tentative.any.js` (both written for the earlier drafts'
/// boolean `params`, so those rows set `legacy`), and RFC 9651 §4.2.
@Suite("No-Vary-Search")
struct NoVarySearchTests {
    /// A field value and what it parses to (nil: the default config).
    struct ParseRow: Sendable, CustomTestStringConvertible {
        let field: String?, expected: NoVarySearch?, legacy: Bool
        var testDescription: String { (field.map { "`\($0)`" } ?? "absent") + (legacy ? " (legacy)" : "") }
    }

    /// Two URLs and whether they are equivalent under a field value; a URL that starts with
    /// `?`, or is empty, is a query on `https://example.com/p` (empty: no query at all).
    struct EquivalenceRow: Sendable, CustomTestStringConvertible {
        let field: String?, a: String, b: String, expected: Bool, legacy: Bool
        var testDescription: String { "\(field ?? "absent")\(legacy ? " (legacy)" : ""): \(a) ~ \(b)" }
    }

    /// A URL, its normalized query and its normalized URL under a field value.
    struct NormalizationRow: Sendable, CustomTestStringConvertible {
        let field: String?, url: String, query: String?, normalized: String
        var testDescription: String { "\(field ?? "absent"): \(url)" }
    }

    /// A parse row.
    static func p(_ field: String?, _ expected: NoVarySearch?, legacy: Bool = false) -> ParseRow {
        ParseRow(field: field, expected: expected, legacy: legacy)
    }
    /// An equivalence row.
    static func e(_ field: String?, _ a: String, _ b: String, _ expected: Bool, legacy: Bool = false) -> EquivalenceRow {
        EquivalenceRow(field: field, a: a, b: b, expected: expected, legacy: legacy)
    }
    /// A normalization row.
    static func n(_ field: String?, _ url: String, _ query: String?, _ normalized: String) -> NormalizationRow {
        NormalizationRow(field: field, url: url, query: query, normalized: normalized)
    }
    /// Key order ignored, nothing else.
    static var keyOrder: NoVarySearch { NoVarySearch(varyOnKeyOrder: false) }
    /// These names ignored; key order significant unless `order` is false.
    static func ignoring(_ names: String..., order: Bool = true) -> NoVarySearch {
        NoVarySearch(params: .ignoring(names), varyOnKeyOrder: order)
    }
    /// All names ignored but these; key order significant unless `order` is false.
    static func only(_ names: String..., order: Bool = true) -> NoVarySearch {
        NoVarySearch(params: .ignoringAllExcept(names), varyOnKeyOrder: order)
    }

    /// Field values and their configs.
    static var parseRows: [ParseRow] { [
        // The draft, "Obtain a URL variation config", Examples: valid inputs.
        p("key-order", keyOrder), p(#"params=("a")"#, ignoring("a")), p(#"except=("x")"#, only("x")),
        p("params=()", nil), p("except=()", only()),
        // The draft: invalid inputs, each the default config.
        p(#"key-order="not a boolean""#, nil), p(#"params="not an inner list""#, nil), p("params=(not-a-string)", nil),
        p("params=?0", nil), p("params=?1", nil), p(#"params=?1, except=("x")"#, nil),
        p(#"params=("a"), except=("x")"#, nil), p("params=(), except=()", nil), p(#"except="not an inner list""#, nil),
        p("except=(not-a-string)", nil), p("except=?1", nil),
        // The draft: valid but unconventional inputs.
        p("key-order=?1", keyOrder), p(#"except=("x"), key-order"#, only("x", order: false)), p("key-order=?0", nil),
        // The draft: Introduction, and "Parse a key" (`+` is a space, then percent-decoding).
        p(#"params=("utm_source" "utm_medium" "utm_campaign")"#, ignoring("utm_source", "utm_medium", "utm_campaign")),
        p(#"except=("productId")"#, only("productId")), p(#"params=("%C3%A9+%E6%B0%97")"#, ignoring("é 気")),
        p(#"params=("%61" "a%2Bb" "%zz" "%FF")"#, ignoring("a", "a+b", "%zz", "\u{FFFD}")),
        // Absent, empty, unknown members (ignored), and members that are not a Dictionary's.
        p(nil, nil), p("", nil), p("   ", nil), p("unknown-key", nil), p("key-order, unknown", keyOrder),
        p(#"key-order, params=("a"), unknown=?1"#, ignoring("a", order: false)), p("Key-Order", nil),
        p("key-order,", nil), p(#"key-order,,params=("a")"#, nil), p("key-order x", nil), p("key-order, 1a", nil),
        p("*key=1, key-order", keyOrder), p("key-order ,\tparams=(\"a\")", ignoring("a", order: false)),
        p("\tkey-order \t", keyOrder),
        // Every RFC 9651 item type, valid in an unknown member, then malformed (the whole field fails).
        p(#"key-order, unknown=(1 -2.5 tok/en:x *t :aGk=: ?0 @-1 %"caf%c3%a9" "s")"#, keyOrder),
        p("key-order, x=1.234", keyOrder), p("key-order, x=1.2345", nil), p("key-order, x=123456789012345", keyOrder),
        p("key-order, x=1234567890123456", nil), p("key-order, x=123456789012.5", keyOrder),
        p("key-order, x=1234567890123.5", nil), p("key-order, x=1.", nil), p("key-order, x=-", nil),
        p("key-order, x=1.2.3", nil), p(#"key-order, x=%"caf%C3%A9""#, nil), p(#"key-order, x=%"%ff""#, nil),
        p("key-order, x=%caf", nil), p("key-order, x=@1.5", nil), p("key-order, x=:aGk:", keyOrder),
        p("key-order, x=:a=b:", nil), p("key-order, x=:a:", nil), p("key-order, x=:***:", nil), p("key-order, x=?", nil),
        // Booleans and parameters: parameters on members and items are ignored.
        p("key-order;a=1;b", keyOrder), p(#"key-order=?1;x="y""#, keyOrder), p("key-order;A=1", nil), p("key-order=?2", nil),
        p("key-order=1", nil), p("key-order=(?1)", nil), p(#"params=("a");except"#, ignoring("a")),
        p(#"params=("a"), except"#, nil),
        // A repeated key: the last value wins.
        p("key-order=?0, key-order", keyOrder), p("key-order, key-order=?0", nil), p(#"except=("a"), except=("b")"#, only("b")),
        // Inner lists: spacing, parameters, and members that are not strings.
        p(#"params=("a"  "b")"#, ignoring("a", "b")), p(#"params=( "a" )"#, ignoring("a")), p(#"params=("a""b")"#, nil),
        p(#"params=("a");x=1"#, ignoring("a")), p(#"params=("a";x "b";y=?0)"#, ignoring("a", "b")),
        p(#"params=("a" b)"#, nil), p(#"params=("a" 1)"#, nil), p(#"params=("a" ?1)"#, nil), p(#"params=("a" ("b"))"#, nil),
        p(#"params=("a"#, nil), p(#"params="a"#, nil), p(#"params=("b" "a" "b")"#, ignoring("a", "b")),
        // Strings: only `\"` and `\\` escapes, printable ASCII only.
        p(#"params=("a\"b")"#, ignoring("a\"b")), p(#"params=("a\\b")"#, ignoring("a\\b")), p(#"params=("a\b")"#, nil),
        p(#"params=("é")"#, nil), p("params=(\"a\tb\")", nil),
        // Drafts -00 to -03 (`acceptingLegacySyntax`): a boolean `params`, and `except` with `params` true.
        p("params", nil), p("params", only(), legacy: true), p("params=?1", only(), legacy: true),
        p(#"params, except=("x")"#, only("x"), legacy: true), p(#"params=?1, except=("x")"#, only("x"), legacy: true),
        p("params=?0", nil, legacy: true), p(#"params=?0, except=("x")"#, nil, legacy: true),
        p("params, except=?1", nil, legacy: true), p("params, except=(not-a-string)", nil, legacy: true),
        p(#"params, except="not an inner list""#, nil, legacy: true), p(#"params=("a"), except=("x")"#, nil, legacy: true),
        p("params=(), except=()", nil, legacy: true), p("key-order, params=?0", nil),
        p("key-order, params=?0", keyOrder, legacy: true), p(#"except=("x")"#, only("x"), legacy: true),
        p(#"params, except=("b"), except=("c")"#, only("c"), legacy: true),
        p(#"params;unknown, except=("c");unknown"#, only("c"), legacy: true), p("unknown-key", nil, legacy: true),
    ] }

    @Test("A field value parses to its URL variation config", arguments: parseRows)
    func parsing(_ row: ParseRow) {
        #expect(NoVarySearch(fieldValue: row.field, acceptingLegacySyntax: row.legacy) == row.expected)
    }

    /// A query of the web-platform-tests' key-order rows.
    static let wptQuery = "b=5&a=3&a=4&d=6&c=5&b=3"
    /// URL pairs and whether they are equivalent.
    static var equivalenceRows: [EquivalenceRow] { [
        // The draft, "Comparing", Examples: under any non-default config, such as `key-order`.
        e("key-order", "https://example.com", "https://example.com/?", true), e("key-order", "?a=x", "?%61=%78", true),
        e("key-order", "?a=é", "?a=%C3%A9", true), e("key-order", "?a=%f6", "?a=%ef%bf%bd", true),
        e("key-order", "?a=x&&&&", "?a=x", true), e("key-order", "?a=", "?a", true), e("key-order", "?a=%20", "?a= &", true),
        e("key-order", "?a=+", "?a= &", true), e("key-order", "?a=%C3%A9", "?a=e%CC%81", false),
        // The draft: under the default config, only identical queries.
        e(nil, "https://example.com/a", "https://example.com/a?", false),
        e(nil, "https://example.com/foo?a=b&&&c", "https://example.com/foo?a=b&c=", false),
        // The draft, "Parse a key": the key `é 気`, however it is written, is ignored.
        e(#"params=("%C3%A9+%E6%B0%97")"#, "?é 気=1", "?é+気=2", true),
        // (`?%C3%A9%20気=3` as the URL Standard parses it: Foundation's `URL(string:)` would escape its `%`s.)
        e(#"params=("%C3%A9+%E6%B0%97")"#, "?%C3%A9%20%E6%B0%97=3", "?%C3%A9+%E6%B0%97=4", true),
        e(#"params=("%C3%A9+%E6%B0%97")"#, "?é=1", "?é=2", false),
        // The draft, Introduction.
        e(#"params=("utm_source" "utm_medium" "utm_campaign")"#, "?id=1&utm_source=a", "?utm_medium=b&id=1", true),
        e(#"except=("productId")"#, "?productId=1&ref=x", "?productId=1", true),
        e(#"except=("productId")"#, "?productId=1", "?productId=2", false),
        // web-platform-tests speculation-rules/prefetch/no-vary-search/test-inputs.js, in order.
        e(#"params=("a")"#, "?a=2&b=3", "?b=3", true), e(#"params("a")"#, "?a=2&b=3", "?b=2", false),
        e(#"params=("a" "b")"#, "?a=2&b=3", "?b=2", true), e("params", "?a=2&b=3", "?b=4&c=5", true, legacy: true),
        e("params", "", "?b=4&c=5", true, legacy: true), e("key-order", "?c=4&b=3&a=2", "?a=2&c=5&b=3", false),
        e("key-order", "?" + wptQuery, "?d=6&a=4&b=5&b=3&c=5&a=3", false),
        e("key-order", "?" + wptQuery, "?d=6&a=3&b=5&b=3&c=5&a=4", true),
        e("key-order=?1", "?" + wptQuery, "?d=6&a=3&b=5&b=3&c=5&a=4", true),
        e("key-order=?0", "?" + wptQuery, "?d=6&a=3&b=5&b=3&c=5&a=4", false),
        e(#"params=("c")"#, "?a=2&b=2&c=5", "?a=2&c=3&b=2", true), e(#"params=("a")"#, "?a=2", "", true),
        e(#"params=("a")"#, "", "?a=2", true), e(#"params, except=("c")"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", true, legacy: true),
        e(#"params, except=("b"), except=("c")"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", true, legacy: true),
        e(#"params, except=("c")"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=5", false, legacy: true),
        e(#"params, except=("c" "d")"#, "?b=5&a=3&d=6&c=5", "?d=6&a=1&b=2&c=5", true, legacy: true),
        e(#"params, except=("c" "d")"#, "?b=5&a=3&a=4&d=6&c=5", "?d=6&a=1&a=2&b=2&b=3&c=5", true, legacy: true),
        e(#"params, except=("c";unknown)"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", true, legacy: true),
        e(#"params=("c";unknown)"#, "?a=2&b=2&c=5", "?a=2&c=3&b=2", true),
        e("key-order;unknown", "?" + wptQuery, "?d=6&a=3&b=5&b=3&c=5&a=4", true),
        e("params;unknown", "", "?b=4&c=5", true, legacy: true),
        e(#"params;unknown, except=("c");unknown"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", true, legacy: true),
        e("", "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", false), e("", "?b=5&a=3&d=6&c=3", "?b=5&a=3&d=6&c=3", true),
        e("", "", "", true), e(#"params=("%C2%A2")"#, "?¢=3", "?¢=4", true),
        e(#"params=("%C2%A2")"#, "?a=2&¢=3", "?¢=4&a=2", true),
        e(#"params, except=("%C2%A2")"#, "?¢=3", "?¢=4", false, legacy: true),
        e(#"params, except=("%C2%A2")"#, "?¢=3&a=4", "?a=5&¢=3", true, legacy: true),
        // The same rows in the latest draft's syntax, and the legacy syntax without `legacy`.
        e(#"except=("c")"#, "?b=5&a=3&d=6&c=3", "?a=1&b=2&c=3", true), e(#"except=("%C2%A2")"#, "?¢=3", "?¢=4", false),
        e("params", "?a=2&b=3", "?b=4&c=5", false), e(#"params, except=("c")"#, "?b=5&c=3", "?a=1&c=3", false),
        // web-platform-tests fetch/http-cache/no-vary-search.tentative.any.js, in order.
        e(#"params, except=("dispatch" "uuid")"#, "?a=1&b=2", "", true, legacy: true), e(nil, "?a=1&b=2", "?b=2&a=1", false),
        e("key-order", "?a=1&b=2", "?b=2&a=1", true), e("key-order", "?a=1&b=2", "?b=2", false),
        e("key-order", "?a=1&b=2", "?a=2&b=2", false), e("key-order", "?a=1&b=2", "?a=1&b=2&c=3", false),
        e(#"params=("a")"#, "?a=1&b=2", "?a=99&b=2", true), e(#"params=("a")"#, "?a=1&b=2", "?a=1&b=99", false),
        e(#"params=("a" "b")"#, "?a=1&b=2&c=3", "?a=9&b=8&c=3", true),
        e(#"params=?1, except=("dispatch" "uuid")"#, "?a=1&b=2", "", true, legacy: true),
        e(#"params, except=("dispatch" "uuid" "id")"#, "?id=42&noise=abc", "?id=99&noise=xyz", false, legacy: true),
        e(#"params=("utm"), key-order"#, "?utm=x&b=2&a=1", "?a=1&b=2&utm=y", true),
        e(#"params=("utm"), key-order"#, "?utm=x&b=2&a=1", "?a=1&b=99&utm=y", false),
        e(#"params=("a"), except=("b")"#, "?a=1", "?a=2", false), e(#"except=("a")"#, "?a=1", "?a=2", false),
        // Everything but the query: userinfo and fragment are not compared; case, default port, empty path.
        e(nil, "?a=1#x", "?a=1#y", true), e(nil, "https://u:p@example.com/p?a=1", "?a=1", true),
        e(nil, "HTTPS://EXAMPLE.com:443?a=1", "https://example.com/?a=1", true),
        e("key-order", "https://example.com/q?a=1", "?a=1", false), e("key-order", "https://example.com:8443/p?a=1", "?a=1", false),
        e("key-order", "http://example.com/p?a=1", "?a=1", false), e("key-order", "https://example.org/p?a=1", "?a=1", false),
        // Key order: a stable sort, so repeated keys keep their order.
        e("key-order", "?b=1&a=2&a=1", "?a=2&b=1&a=1", true), e("key-order", "?a=1&a=2", "?a=2&a=1", false),
        // Everything ignored, `+` in names, and no Unicode normalization of names.
        e("except=()", "?a=1", "?b=2", true), e("except=()", "?a=1", "", true), e("except=()", "", "?", true),
        e(#"params=("a+b")"#, "?a+b=1&c=1", "?a%20b=2&c=1", true), e(#"params=("a+b")"#, "?a%2Bb=1&c=1", "?c=1", false),
        e(#"params=("%C3%A9")"#, "?%C3%A9=1", "?%C3%A9=2", true), e(#"params=("e%CC%81")"#, "?%C3%A9=1", "?%C3%A9=2", false),
    ] }

    @Test("Equivalence modulo variation config, and agreement with the normalized URLs", arguments: equivalenceRows)
    func equivalence(_ row: EquivalenceRow) throws {
        let config = NoVarySearch(fieldValue: row.field, acceptingLegacySyntax: row.legacy) ?? .default
        let a = try Self.url(row.a), b = try Self.url(row.b)
        #expect(config.equivalent(a, b) == row.expected)
        #expect(config.equivalent(b, a) == row.expected)
        #expect((config.normalized(a).absoluteString == config.normalized(b).absoluteString) == row.expected)
    }

    /// URLs and their normalized forms.
    static var normalizationRows: [NormalizationRow] { [
        // The default config keeps the query as sent, and an empty one.
        n(nil, "https://example.com/p?b=1&a=2#f", "b=1&a=2", "https://example.com/p?b=1&a=2"),
        n(nil, "https://example.com/p", nil, "https://example.com/p"), n(nil, "https://example.com/p?", "", "https://example.com/p?"),
        // Otherwise the form serializer's output: `name=value`, `+` for a space, upper-case escapes.
        n("key-order", "?b=2&a=1&b=1", "a=1&b=2&b=1", "https://example.com/p?a=1&b=2&b=1"),
        n("key-order", "?", "", "https://example.com/p"), n("key-order", "?a", "a=", "https://example.com/p?a="),
        n("key-order", "?a=x&&&", "a=x", "https://example.com/p?a=x"), n("key-order", "?q=a+b%20c", "q=a+b+c", "https://example.com/p?q=a+b+c"),
        n("key-order", "?a=%2B", "a=%2B", "https://example.com/p?a=%2B"), n("key-order", "?a=*-._", "a=*-._", "https://example.com/p?a=*-._"),
        n("key-order", "?a=~!'()", "a=%7E%21%27%28%29", "https://example.com/p?a=%7E%21%27%28%29"),
        n("key-order", "?q=é", "q=%C3%A9", "https://example.com/p?q=%C3%A9"),
        // Bad UTF-8 becomes U+FFFD per maximal subpart, as the Encoding Standard decodes; a BOM stays.
        n("key-order", "?a=%f6", "a=%EF%BF%BD", "https://example.com/p?a=%EF%BF%BD"),
        n("key-order", "?a=%F0%80", "a=%EF%BF%BD%EF%BF%BD", "https://example.com/p?a=%EF%BF%BD%EF%BF%BD"),
        n("key-order", "?a=%E6%B0", "a=%EF%BF%BD", "https://example.com/p?a=%EF%BF%BD"),
        n("key-order", "?a=%ED%A0%80", "a=%EF%BF%BD%EF%BF%BD%EF%BF%BD", "https://example.com/p?a=%EF%BF%BD%EF%BF%BD%EF%BF%BD"),
        n("key-order", "?%EF%BB%BFa=1", "%EF%BB%BFa=1", "https://example.com/p?%EF%BB%BFa=1"),
        n("key-order", "?a=%zz", "a=%25zz", "https://example.com/p?a=%25zz"),
        // Sorted by UTF-16 code units: U+1F600 (D83D DE00) before U+FF61, though later in code points.
        n("key-order", "?%EF%BD%A1=1&%F0%9F%98%80=2", "%F0%9F%98%80=2&%EF%BD%A1=1", "https://example.com/p?%F0%9F%98%80=2&%EF%BD%A1=1"),
        // Everything but the query, as compared.
        n(#"params=("utm")"#, "https://User:pw@EXAMPLE.com:443?utm=1#f", "", "https://example.com/"),
        n("key-order", "HTTP://Example.COM:80/p?b&a", "a=&b=", "http://example.com/p?a=&b="),
        n(#"except=("id")"#, "?x=1&id=2&id=1", "id=2&id=1", "https://example.com/p?id=2&id=1"),
        n(#"except=("id"), key-order"#, "?id=2&x=1&id=1", "id=2&id=1", "https://example.com/p?id=2&id=1"),
    ] }

    @Test("The normalized query and URL", arguments: normalizationRows)
    func normalization(_ row: NormalizationRow) throws {
        let config = NoVarySearch(fieldValue: row.field) ?? .default
        let url = try Self.url(row.url)
        #expect(config.normalizedQuery(of: url) == row.query)
        #expect(config.normalized(url).absoluteString == row.normalized)
    }

    @Test("Equivalence agrees with the normalized forms for every pair of a corpus")
    func agreementAcrossACorpus() throws {
        let fields: [String?] = [nil, "key-order", #"params=("a")"#, #"params=("a"), key-order"#, #"except=("b")"#,
                                 #"except=("b" "a"), key-order"#, "except=()", #"params=("a+b" "%C3%A9")"#]
        let urls = try ["", "?", "?a=1", "?a=1&b=2", "?b=2&a=1", "?a=2&a=1&b=2", "?b=2&a=1&a=2", "?a=1&&b=2", "?%61=1&b=2",
                        "?b=%32&a=1#f", "?a+b=1", "?a%20b=2", "?é=1", "?e%CC%81=1", "https://u@example.com/p?b=2",
                        "https://example.com/q?a=1", "HTTPS://EXAMPLE.COM:443/p?a=1"].map(Self.url)
        for field in fields {
            let config = try #require(NoVarySearch(fieldValue: field) ?? (field == nil ? .default : nil))
            for a in urls {
                // A response stored under the normalized URL answers the URL itself.
                #expect(config.equivalent(a, config.normalized(a)))
                #expect(config.normalized(config.normalized(a)) == config.normalized(a))
                for b in urls {
                    let sameBase = Self.base(of: a) == Self.base(of: b)
                    let queriesEqual = config.normalizedQuery(of: a) == config.normalizedQuery(of: b)
                    #expect(config.equivalent(a, b) == (config.normalized(a) == config.normalized(b)), "\(field ?? "-"): \(a) ~ \(b)")
                    #expect(config.equivalent(a, b) == (sameBase && queriesEqual), "\(field ?? "-"): \(a) ~ \(b)")
                }
            }
        }
    }

    @Test("Configs are equal by their names' code units, in any order, repeated or not")
    func equalityAndHashing() {
        let one = NoVarySearch(fieldValue: #"params=("b" "a" "b")"#), other = NoVarySearch(fieldValue: #"params=("a" "b")"#)
        #expect(one == other && one.hashValue == other.hashValue)
        #expect(one?.params == .ignoring(["a", "b"]))
        let composed = NoVarySearch(params: .ignoring(["\u{E9}"])), decomposed = NoVarySearch(params: .ignoring(["e\u{301}"]))
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed]).count == 2)
        #expect(NoVarySearch(params: .ignoring(["a"])) != NoVarySearch(params: .ignoringAllExcept(["a"])))
        #expect(NoVarySearch.default.isDefault && NoVarySearch().isDefault)
        #expect(!NoVarySearch(params: .ignoringAllExcept([])).isDefault && !NoVarySearch(varyOnKeyOrder: false).isDefault)
    }

    /// Everything but the query, as the draft compares it.
    static func base(of url: URL) -> String? {
        var parts = NoVarySearch.components(of: url)
        parts?.percentEncodedQuery = nil
        return parts?.string
    }

    /// A URL from a row: a query (or nothing) on `https://example.com/p`, or a whole URL.
    /// - Throws: an issue when the text is not a URL.
    static func url(_ text: String) throws -> URL {
        try #require(URL(string: text.hasPrefix("?") || text.isEmpty ? "https://example.com/p" + text : text))
    }
}
