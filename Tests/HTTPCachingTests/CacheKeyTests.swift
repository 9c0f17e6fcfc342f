import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

@Suite("Cache keys")
struct CacheKeyTests {
    func key(_ string: String, _ method: String = "GET") -> CacheKey {
        CacheKey(method: method, url: URL(string: string)!)
    }

    @Test("scheme and host are lower-cased, default ports and fragments dropped, empty path is /")
    func normalization() {
        #expect(key("HTTP://Example.COM:80/A?b=C#frag").url == "http://example.com/A?b=C")
        #expect(key("https://example.com:443").url == "https://example.com/")
        #expect(key("https://example.com:80/x").url == "https://example.com:80/x")
        #expect(key("http://example.com:8080/x").url == "http://example.com:8080/x")
    }

    @Test("the stored form reads back every part, a part that begins with a combining mark included (found by fuzzing)")
    func storageStringRoundTrip() {
        let keys = [CacheKey(method: "\u{0599}AD", normalizedURL: "http://example.test/a?b=c"),
                    CacheKey(method: "GET", normalizedURL: "http://h/\u{0301}", partition: CredentialPartition(rawValue: "\u{0301}p"),
                             variant: "\u{20DD}", namespace: "\u{0300}n")]
        for key in keys { #expect(CacheKey(storageString: key.storageString) == key) }
    }

    @Test("the query is part of the key; the method too")
    func queryAndMethod() {
        #expect(key("http://h/items?page=1") != key("http://h/items?page=2"))
        #expect(key("http://h/items?page=1") == key("http://H/items?page=1"))
        #expect(key("http://h/a", "get") == key("http://h/a", "GET"))
        #expect(key("http://h/a", "GET") != key("http://h/a", "HEAD"))
        #expect(key("http://h/a").description == "GET http://h/a")
    }

    @Test("query items can be dropped from a key")
    func removingQueryItems() {
        #expect(key("http://h/a?t=123&page=2").removingQueryItems(named: ["t"]) == key("http://h/a?page=2"))
        #expect(key("http://h/a?t=123").removingQueryItems(named: ["t"]) == key("http://h/a"))
        #expect(key("http://h/a").removingQueryItems(named: ["t"]) == key("http://h/a"))
    }
}

@Suite("Fast paths agree with the slow ones")
struct FastPathTests {
    @Test("a URL already in normal form keys the same with or without parsing", arguments: [
        "http://example.com/a?b=C", "https://example.com/", "http://example.com:8080/x?y", "https://h/a%20b",
        "HTTP://Example.com/a", "http://example.com:80/a", "https://example.com:443/", "http://example.com",
        "http://user@example.com/a", "http://example.com/a#frag", "http://[::1]:8080/a", "https://example.com:4430/a",
        "http://example.com:080/a?b", "http://example.com:/a", "https://example.com:0443/", "http://example.com:0800/a",
    ])
    func normalizedURLs(string: String) {
        let url = URL(string: string)!
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true)!
        let scheme = components.scheme?.lowercased()
        components.scheme = scheme
        components.percentEncodedUser = nil // userinfo joins the credential partition, never the key
        components.percentEncodedPassword = nil
        if let host = components.percentEncodedHost { components.percentEncodedHost = host.lowercased() }
        if (scheme == "http" && components.port == 80) || (scheme == "https" && components.port == 443) { components.port = nil }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        components.fragment = nil
        #expect(CacheKey.normalize(url) == components.string!)
    }

    @Test("ASCII case-insensitive header names")
    func asciiCase() {
        #expect("Content-Type".equalsIgnoringASCIICase("content-type"))
        #expect("ETAG".equalsIgnoringASCIICase("etag"))
        #expect(!"ETag".equalsIgnoringASCIICase("ETags"))
        #expect(!"a-b".equalsIgnoringASCIICase("a_b"))
        #expect(!"[".equalsIgnoringASCIICase("{"), "only letters fold")
    }

    @Test("a hit response is reused within the same second of age, rebuilt past it")
    func builtResponses() {
        let url = URL(string: "http://example.test/")!
        let entry = CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: ["ETag": "1"], body: Data(), storedAt: Date())
        let built = BuiltResponses()
        func response(_ entry: CacheEntry, _ status: CacheStatus, _ age: TimeInterval, url: URL = url) -> HTTPURLResponse {
            built.response(for: entry, url: url, form: .whole, disposition: Disposition(status: status, hit: true, ttl: 60 - age, age: age),
                           cacheName: "HTTPCaching").response
        }
        let first = response(entry, .fresh, 3.2)
        #expect(response(entry, .fresh, 3.9) === first)
        #expect(response(entry, .fresh, 4.0) !== first)
        #expect(response(entry, .stale, 4.0).cacheStatus == .stale)
        var newer = entry
        newer.generation = entry.generation &+ 1
        #expect(response(newer, .stale, 4.0) !== response(entry, .stale, 4.0), "a new version of the entry, even stored at the same moment, is built anew")
        #expect(response(newer, .stale, 4.0).value(forHTTPHeaderField: "Age") == "4")
        let other = URL(string: "http://u:p@example.test/#f")!
        #expect(response(entry, .fresh, 3.9, url: other) !== first && response(entry, .fresh, 3.9, url: other).url == other,
                "another request URL for the same entry gets a response of its own, with that URL")
    }
}
