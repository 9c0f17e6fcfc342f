import Foundation
import Testing
@testable import HTTPCaching

/// How the cache keys `No-Vary-Search`: the key of an entry stored under a config, the key of
/// a URL's index, which keys never use the field, and the canonical field value the index
/// lists configs by.
@Suite("No-Vary-Search keys")
struct NoVarySearchKeyTests {
    @Test("keys: an entry's is the normalized URL marked, the index's the URL without its query; some keys never use the field")
    func keys() throws {
        let config = try #require(NoVarySearch(fieldValue: #"params=("utm"), key-order"#))
        let key = CacheKey(url: try #require(URL(string: "https://Example.com:443/p?utm=1&b=2&a=1#f")))
        let entryKey = try #require(config.entryKey(for: key))
        #expect(entryKey.url == "https://example.com/p?a=1&b=2#no-vary-search")
        let index = try #require(NoVarySearch.indexKey(for: key))
        #expect(index.url == "https://example.com/p" && index.variant == "@no-vary-search")
        #expect(NoVarySearch.indexKey(for: entryKey) == index)
        #expect(NoVarySearch.applies(to: key) && !NoVarySearch.applies(to: entryKey))
        var post = key
        post.method = "POST"
        var keyedBody = key
        keyedBody.url += "#body=abc"
        #expect(!NoVarySearch.applies(to: post) && !NoVarySearch.applies(to: keyedBody))
    }

    @Test("an index key read from a normalized URL's text is the one parsing gives", arguments: [
        "http://example.com/", "http://example.com/p?a=1&b=2", "https://example.com:8443/p/q?", "http://a.b/%7Euser/x%20y?q=%C3%A9&r",
        "http://127.0.0.1:8080/p;x=1?a=b?c", "https://example.com/p?a=%3F#", "http://x/a/../b?c=d", "http://x/p?u=1&u=2&=&&",
        "https://example.com:443/p?a", "HTTP://Example.com/p?a", "http://user@x/p?q", "http://[::1]/p?q", "http://x?q",
        "http://x:080/p?a=1", "http://x:/p?a=1", "https://x:0443/p?q", "http://x:00080/p", "http://x:0800/p?q", "http://x:0/p?q",
    ])
    func indexKeyFastPath(url: String) throws {
        let parsed = NoVarySearch.parsedBase(url)
        if let fast = NoVarySearch.normalizedBase(url) {
            #expect(fast == parsed)
        } else {
            #expect(!CacheKey.isNormalized(url))
        }
        // The URL a key holds is normalized: the fast path, when it is taken, agrees.
        let key = CacheKey(url: try #require(URL(string: url)))
        if let fast = NoVarySearch.normalizedBase(key.url) { #expect(fast == NoVarySearch.parsedBase(key.url)) }
        #expect(NoVarySearch.normalizedBase("http://example.com/p?a=1") == "http://example.com/p", "the common case takes it")
        #expect(NoVarySearch.indexKey(for: key)?.url == NoVarySearch.parsedBase(key.url))
    }

    @Test("a config's field value parses back to it, whatever its names hold")
    func fieldValueRoundTrip() throws {
        let configs = NoVarySearchTests.parseRows.compactMap(\.expected) + [
            NoVarySearch(params: .ignoring(["a\"b", "a\\b", " ", "+", "%", "é 気", "\u{FFFD}", "e\u{301}", "😀", ""])),
            NoVarySearch(params: .ignoringAllExcept([]), varyOnKeyOrder: false),
        ]
        for config in configs {
            #expect(NoVarySearch(fieldValue: config.fieldValue) == config, "\(config.fieldValue)")
        }
        #expect(NoVarySearch(params: .ignoring(["utm_source", "a b+c", "é"])).fieldValue == #"params=("a%20b%2Bc" "utm_source" "%C3%A9")"#)
        #expect(NoVarySearch(params: .ignoringAllExcept(["b", "a"]), varyOnKeyOrder: false).fieldValue == #"except=("a" "b"), key-order"#)
        #expect(NoVarySearch.configs(inIndexBody: NoVarySearch.indexBody(configs)) == nil, "more than 8")
        let eight = Array(configs.prefix(8))
        #expect(NoVarySearch.configs(inIndexBody: NoVarySearch.indexBody(eight)) == eight)
        for damaged in ["", "\n", "key-order\n", "params=()", "garbage", "key-order\nparams=(", "params=(\"a\");x=\u{1}"] {
            #expect(NoVarySearch.configs(inIndexBody: Data(damaged.utf8)) == nil, "\(damaged)")
        }
        #expect(NoVarySearch.configs(inIndexBody: Data([0xFF, 0xFE])) == nil)
    }
}
