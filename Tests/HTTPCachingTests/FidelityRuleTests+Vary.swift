import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension FidelityRuleTests {
    // MARK: - RFC 9111 section 4.1, RFC 9110 section 12.5.5: Vary

    struct VaryRow: Sendable, CustomTestStringConvertible {
        let field: String
        let stored: String?
        let requested: String?
        let matches: Bool
        var testDescription: String { "\(field): \(stored ?? "absent") vs \(requested ?? "absent")" }
    }

    static let varyRows: [VaryRow] = [
        VaryRow(field: "Accept-Language", stored: "en, de", requested: "EN,de", matches: true),
        VaryRow(field: "Accept-Language", stored: "en, de", requested: "de,en", matches: false),
        VaryRow(field: "Accept-Language", stored: "en-US, fr;q=0.5", requested: "EN-us ,FR;Q=0.5", matches: true),
        VaryRow(field: "Accept-Language", stored: "en", requested: "fr", matches: false),
        VaryRow(field: "Accept-Language", stored: "en", requested: "en, fr", matches: false),
        VaryRow(field: "Accept-Encoding", stored: "gzip, br", requested: "gzip,br", matches: true),
        VaryRow(field: "Accept-Encoding", stored: "gzip, br", requested: "br,gzip", matches: false),
        VaryRow(field: "Accept", stored: "text/html, application/json", requested: "application/json, text/html", matches: false),
        VaryRow(field: "Accept-Encoding", stored: "GZIP", requested: "gzip", matches: true),
        VaryRow(field: "Accept-Encoding", stored: "gzip", requested: nil, matches: false),
        VaryRow(field: "Foo", stored: "1,2", requested: " 1, 2 ", matches: true),
        VaryRow(field: "Foo", stored: "1, 2", requested: "2, 1", matches: false),
        VaryRow(field: "Foo", stored: "1", requested: "2", matches: false),
        VaryRow(field: "Foo", stored: "a", requested: "A", matches: false),
        VaryRow(field: "Foo", stored: nil, requested: nil, matches: true),
        VaryRow(field: "Foo", stored: nil, requested: "1", matches: false),
    ]

    @Test("RFC 9111 §4.1: stored Vary values select requests; Accept-* compared after case and whitespace, never reordered (servers break ties by order)",
          arguments: varyRows)
    func vary(row: VaryRow) {
        func headers(_ value: String?) -> RequestHeaders {
            RequestHeaders(CacheDecisionTests.request(headers: value.map { [row.field: $0] } ?? [:]))
        }
        let names = [row.field.lowercased()]
        let entry = Self.entry(200, ["Vary": row.field], body: "x")
        var stored = entry
        stored.varyValues = Vary.values(names: names, headers: headers(row.stored))
        #expect(Vary.matches(stored, headers(row.requested)) == row.matches)
        #expect((Vary.variantName(names: names, headers: headers(row.stored))
                 == Vary.variantName(names: names, headers: headers(row.requested))) == row.matches,
                "one variant key per combination of normalized values")
        #expect(Vary.variantName(names: names, values: stored.varyValues) == Vary.variantName(names: names, headers: headers(row.stored)),
                "a stored entry names its own variant")
    }

    @Test("RFC 9111 §4.1: each combination is an entry of its own, at most Vary.maxVariantsPerURL per URL, the oldest removed",
          arguments: [1, 8, 9, 12], [false, true])
    func boundedVariants(count: Int, onDisk: Bool) throws {
        let clock = TestClock()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fidelity-variants-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store: any ResponseStore = onDisk ? try DiskResponseStore(directory: directory) : MemoryResponseStore()
        let cache = HTTPCache(store: store, now: clock.closure)
        let recorder = EventRecorder(cache)
        func request(_ language: String) -> URLRequest {
            var request = URLRequest(url: Self.url)
            request.setValue(language, forHTTPHeaderField: "Accept-Language")
            return request
        }
        let languages = (0..<count).map { "lang-\($0)" }
        for language in languages {
            let response = HTTPURLResponse(url: Self.url, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Vary": "Accept-Language", "Content-Language": language])!
            try cache.manage.storeResponse(response, data: Data(language.utf8), for: request(language))
            clock.advance(by: 1)
        }
        let kept = min(count, Vary.maxVariantsPerURL)
        #expect(Vary.maxVariantsPerURL == 8)
        #expect(cache.entryCount == kept + 2, "the variants kept, plus the entry under the URL and the variant index")
        for (index, language) in languages.enumerated() {
            let entry = cache.manage.cachedEntry(for: request(language))
            if index < count - kept {
                #expect(entry == nil, "\(language) was stored longest ago: removed")
            } else {
                #expect(entry.map { String(decoding: $0.body, as: UTF8.self) } == language)
                #expect(entry?.varyValues.keys.sorted() == ["accept-language"], "only the values the response varies on")
            }
        }
        #expect(recorder.count(.evicted) == count - kept)
        let primary = try cache.manage.key(for: request("x"))
        #expect(cache.engine.variantNames(of: primary).count == kept)
        #expect(try cache.store.entry(for: primary)?.varyValues.keys.sorted() == ["accept-language"],
                "the index is an entry of its own, not part of the URL's")
    }
}
