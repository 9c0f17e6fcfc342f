import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// RFC 9111 section 4.3.4: which stored response a 304 selects, and what merging it changes.
@Suite("304 selection and merging, one row per case")
struct ValidationTests {
    static let url = URL(string: "http://example.test/v")!
    static let storedAt = Date(timeIntervalSince1970: 1_000_000)
    static let now = storedAt.addingTimeInterval(500)

    static func entry(_ headers: [String: String]) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: 200, headers: headers, body: Data("body".utf8),
                   storedAt: storedAt, windows: .test(fresh: 1, usable: 2), varyValues: ["accept": "x"], generation: 7)
    }

    static func notModified(_ headers: [String: String]) -> ResponseHead {
        ResponseHead(statusCode: 304, headers: headers, url: url)
    }

    struct SelectionRow: Sendable, CustomTestStringConvertible {
        var notModified: [String: String]
        var stored: [String: String]
        var selects: Bool
        var testDescription: String { "304 \(notModified) against \(stored)" }
    }

    static let imf = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let rfc850 = "Sunday, 06-Nov-94 08:49:37 GMT"

    static let selectionRows: [SelectionRow] = [
        // A strong ETag selects only the same strong ETag.
        SelectionRow(notModified: ["ETag": "\"a\""], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "\"b\""], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "\"a\""], stored: ["ETag": "W/\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "\"A\""], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["etag": " \"a\"\t"], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "\"a\""], stored: ["Last-Modified": imf], selects: false),
        SelectionRow(notModified: ["ETag": "*"], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "\"a\", \"b\""], stored: ["ETag": "\"a\""], selects: false),
        // A weak ETag selects by weak comparison.
        SelectionRow(notModified: ["ETag": "W/\"a\""], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "W/\"a\""], stored: ["ETag": "W/\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "W/\"b\""], stored: ["ETag": "W/\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "w/\"a\""], stored: ["ETag": "W/\"a\""], selects: false),
        // The ETag decides when there is one, whatever Last-Modified says.
        SelectionRow(notModified: ["ETag": "\"a\"", "Last-Modified": "Mon, 07 Nov 1994 08:49:37 GMT"],
                     stored: ["ETag": "\"a\"", "Last-Modified": imf], selects: true),
        SelectionRow(notModified: ["ETag": "\"b\"", "Last-Modified": imf], stored: ["ETag": "\"a\"", "Last-Modified": imf], selects: false),
        // Without an ETag, Last-Modified must name the same instant.
        SelectionRow(notModified: ["Last-Modified": imf], stored: ["Last-Modified": imf], selects: true),
        SelectionRow(notModified: ["Last-Modified": rfc850], stored: ["Last-Modified": imf], selects: true),
        SelectionRow(notModified: ["Last-Modified": "Mon, 07 Nov 1994 08:49:37 GMT"], stored: ["Last-Modified": imf], selects: false),
        SelectionRow(notModified: ["Last-Modified": "yesterday"], stored: ["Last-Modified": imf], selects: false),
        SelectionRow(notModified: ["Last-Modified": imf], stored: ["ETag": "\"a\""], selects: false),
        // No validator at all: it answers the request made conditional with the entry's own.
        SelectionRow(notModified: [:], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["Cache-Control": "max-age=5"], stored: ["Last-Modified": imf], selects: true),
        SelectionRow(notModified: [:], stored: [:], selects: true),
    ]

    @Test("Validation.selects", arguments: selectionRows)
    func selects(row: SelectionRow) {
        #expect(Validation.selects(Self.notModified(row.notModified), Self.entry(row.stored)) == row.selects)
    }

    struct MergeRow: Sendable, CustomTestStringConvertible {
        var label: String
        var stored: [String: String]
        var notModified: [String: String]
        var keepingCookies = false
        /// The merged entry's fields (names compared case-insensitively).
        var merged: [String: String]
        var testDescription: String { label }
    }

    static let mergeRows: [MergeRow] = [
        MergeRow(label: "the 304's fields replace and add", stored: ["Cache-Control": "max-age=1", "ETag": "\"a\"", "X-Old": "1"],
                 notModified: ["Cache-Control": "max-age=9", "ETag": "\"a\"", "X-New": "2"],
                 merged: ["Cache-Control": "max-age=9", "ETag": "\"a\"", "X-Old": "1", "X-New": "2"]),
        MergeRow(label: "names compared without case: one field, the 304's value", stored: ["cache-control": "max-age=1"],
                 notModified: ["CACHE-CONTROL": "max-age=9"], merged: ["CACHE-CONTROL": "max-age=9"]),
        MergeRow(label: "framing fields describe the stored body and are kept",
                 stored: ["Content-Length": "4", "Content-Encoding": "gzip", "Content-Range": "bytes 0-3/4"],
                 notModified: ["Content-Length": "0", "Content-Encoding": "br", "Content-Range": "bytes */9", "Transfer-Encoding": "chunked"],
                 merged: ["Content-Length": "4", "Content-Encoding": "gzip", "Content-Range": "bytes 0-3/4"]),
        MergeRow(label: "Set-Cookie is never merged when storing refuses it", stored: ["ETag": "\"a\""],
                 notModified: ["ETag": "\"a\"", "Set-Cookie": "sid=secret", "set-cookie2": "x"],
                 merged: ["ETag": "\"a\"", "set-cookie2": "x"]),
        MergeRow(label: "Set-Cookie is merged when the configuration stores responses setting cookies", stored: ["ETag": "\"a\""],
                 notModified: ["ETag": "\"a\"", "Set-Cookie": "sid=1"], keepingCookies: true, merged: ["ETag": "\"a\"", "Set-Cookie": "sid=1"]),
        MergeRow(label: "hop-by-hop fields, those Connection names and the cache's own status field are never merged", stored: ["X": "1"],
                 notModified: ["Connection": "close, X-Hop", "X-Hop": "h", "Keep-Alive": "timeout=5", "TE": "trailers", "Upgrade": "h2c",
                               "Proxy-Authenticate": "Basic", "Proxy-Connection": "keep-alive", "X-HTTP-Caching": "fresh", "X-End": "e"],
                 merged: ["X": "1", "X-End": "e"]),
        MergeRow(label: "Age and Date are the 304's", stored: ["Age": "50", "Date": imf, "ETag": "\"a\""],
                 notModified: ["Age": "3", "Date": "Mon, 07 Nov 1994 08:49:37 GMT", "ETag": "\"a\""],
                 merged: ["Age": "3", "Date": "Mon, 07 Nov 1994 08:49:37 GMT", "ETag": "\"a\""]),
        MergeRow(label: "a stored Age or Date the 304 does not repeat goes: the response was just validated",
                 stored: ["age": "50", "Date": imf, "ETag": "\"a\"", "Expires": imf], notModified: ["ETag": "\"a\""],
                 merged: ["ETag": "\"a\"", "Expires": imf]),
    ]

    @Test("Validation.merge", arguments: mergeRows)
    func merge(row: MergeRow) {
        let stored = Self.entry(row.stored)
        let merged = Validation.merge(stored, notModified: Self.notModified(row.notModified), keepingCookies: row.keepingCookies, now: Self.now)
        #expect(merged.headers == row.merged)
        #expect(merged.body == stored.body && merged.url == stored.url && merged.key == stored.key && merged.statusCode == 200)
        #expect(merged.varyValues == stored.varyValues && merged.windows == stored.windows)
        #expect(merged.storedAt == Self.now, "the age starts again")
        #expect(merged.generation != stored.generation, "a new version of the entry")
    }

    @Test("merging never adds a field storing would refuse, whatever the 304 carries", arguments: FuzzCases.seeds([0x304]))
    func mergeAddsNothingStoringRefuses(seed: UInt64) {
        let names = ["Set-Cookie", "Connection", "Keep-Alive", "Transfer-Encoding", "Upgrade", "TE", "Proxy-Authenticate",
                     "X-HTTP-Caching", "Content-Length", "ETag", "Cache-Control", "Age", "Date", "X-Custom", "Vary", "Expires"]
        FuzzCases(seed: seed, minimum: 500, maximum: 2000, budget: .milliseconds(300)).run { fuzzCase in
            var fuzzer = FieldFuzzer(seed: fuzzCase.seed)
            var fields: [String: String] = [:]
            for _ in 0..<fuzzer.int(0...8) {
                let name = names[fuzzer.int(0...(names.count - 1))]
                fields[fuzzer.int(0...1) == 0 ? name : name.lowercased()] = fuzzer.int(0...3) == 0 ? names[fuzzer.int(0...(names.count - 1))] : fuzzer.string()
            }
            let keeping = fuzzer.int(0...1) == 0
            let head = Self.notModified(fields)
            let stored = Self.entry(["ETag": "\"a\"", "Content-Length": "4", "Age": "1"])
            let merged = Validation.merge(stored, notModified: head, keepingCookies: keeping, now: Self.now)
            let allowed = Storability.storedHeaders(of: head, keepingCookies: keeping)
            for (name, value) in merged.headers where stored.headers[name] != value {
                #expect(allowed[name] == value, "\(fuzzCase.label): \(name): \(value) came from \(fields)")
            }
        }
    }

    @Test("HTTP policy: a revalidated entry's Age is the 304's, so it is fresh for its whole lifetime again")
    func revalidatedAge() async throws {
        let h = try Harness(configuration: CacheConfiguration(policy: .httpSemantics))
        h.origin.route("/a") { request, _ in
            if request.header("If-None-Match") == "\"a\"" { return .init(status: 304, headers: [("ETag", "\"a\"")]) }
            // Came through a cache that held it for 50 of its 100 seconds.
            return .init(headers: [("ETag", "\"a\""), ("Cache-Control", "max-age=100"), ("Age", "50")], text: "body")
        }
        #expect(try await h.get("/a").status == .miss)
        h.clock.advance(by: 60)
        let revalidated = try await h.get("/a")
        #expect(revalidated.status == .revalidated && revalidated.response.value(forHTTPHeaderField: "Age") == "0")
        h.clock.advance(by: 60)
        let later = try await h.get("/a")
        #expect(later.status == .fresh && later.response.value(forHTTPHeaderField: "Age") == "60",
                "validated 60 seconds ago by the origin itself, not 110")
        #expect(h.origin.requestCount("/a") == 2)
    }
}

extension ValidationTests {
    static let lm = "Sun, 06 Nov 1994 08:49:37 GMT"
    static let headRows: [SelectionRow] = [
        SelectionRow(notModified: ["ETag": "\"a\""], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "\"a\"", "Content-Length": "4"], stored: ["ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["ETag": "\"a\"", "Content-Length": "5"], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "\"b\""], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["ETag": "W/\"a\""], stored: ["ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["Last-Modified": lm], stored: ["Last-Modified": lm, "ETag": "\"a\""], selects: true),
        SelectionRow(notModified: ["Last-Modified": lm, "ETag": "\"b\""], stored: ["Last-Modified": lm, "ETag": "\"a\""], selects: false),
        SelectionRow(notModified: ["Content-Length": "4"], stored: ["ETag": "\"a\""], selects: true), // none received: no mismatch
        SelectionRow(notModified: [:], stored: [:], selects: true),
        SelectionRow(notModified: ["Last-Modified": "yesterday"], stored: ["Last-Modified": lm], selects: false),
        SelectionRow(notModified: ["ETag": "\"a\""], stored: [:], selects: false),
        // A coded body is stored decoded: the HEAD's length is the stored response's own.
        SelectionRow(notModified: ["ETag": "\"a\"", "Content-Length": "20"], stored: ["ETag": "\"a\"", "Content-Length": "20", "Content-Encoding": "gzip"], selects: true),
        // Lengths past 2^31 compare exactly (delta-seconds would saturate both at 2^31).
        SelectionRow(notModified: ["Content-Length": "5000000000"], stored: ["Content-Length": "5000000000"], selects: true),
        SelectionRow(notModified: ["Content-Length": "4294967296"], stored: ["Content-Length": "2147483648"], selects: false),
        SelectionRow(notModified: ["Content-Length": "20, 20"], stored: ["Content-Length": "20"], selects: true),
    ]

    @Test("RFC 9111 §4.3.5: a 200 to a HEAD describes the stored GET when each validator it has (if any), and its length, match",
          arguments: headRows)
    func headDescribes(row: SelectionRow) {
        let head = ResponseHead(statusCode: 200, headers: row.notModified, url: Self.url)
        #expect(Validation.headDescribes(head, Self.entry(row.stored)) == row.selects)
    }
}
