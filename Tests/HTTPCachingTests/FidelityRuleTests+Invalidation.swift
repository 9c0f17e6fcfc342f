import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension FidelityRuleTests {
    // MARK: - RFC 9111 section 4.4: invalidation

    struct InvalidationRow: Sendable, CustomTestStringConvertible {
        let method: String
        let status: Int
        let invalidates: Bool
        var testDescription: String { "\(method) answered \(status)" }
    }

    static let invalidationRows: [InvalidationRow] = {
        var rows: [InvalidationRow] = []
        for method in ["POST", "PUT", "PATCH", "DELETE", "M-SEARCH", "PROPFIND", "purge"] {
            for status in [200, 201, 204, 301, 303, 399] { rows.append(InvalidationRow(method: method, status: status, invalidates: true)) }
            for status in [400, 404, 409, 500, 503] { rows.append(InvalidationRow(method: method, status: status, invalidates: false)) }
        }
        for method in ["OPTIONS", "TRACE"] { rows.append(InvalidationRow(method: method, status: 200, invalidates: false)) }
        return rows
    }()

    @Test("RFC 9111 §4.4: a method not known to be safe invalidates the URL on a non-error answer, unknown methods included",
          arguments: invalidationRows)
    func invalidation(row: InvalidationRow) {
        var request = CacheDecisionTests.request(row.method)
        request.httpBody = Data("abc".utf8)
        var transaction = CacheTransaction(.init(request: request, headers: RequestHeaders(request), key: CacheKey(url: Self.url),
                                                 configuration: Self.twoTier, role: .foreground(streaming: false)))
        let started = transaction.start(entry: Self.entry(), now: Self.storedAt)
        #expect(started == [.forward(conditional: [:])], "the request goes out as it is")
        let head = ResponseHead(statusCode: row.status, headers: ["Location": "/created", "Content-Location": "http://example.test/cl"],
                                url: Self.url)
        let actions = transaction.head(head, now: Self.storedAt)
        let invalidated = actions.compactMap { action -> [URL]? in
            if case .invalidate(let urls) = action { return urls }
            return nil
        }
        if row.invalidates {
            #expect(invalidated == [[Self.url, URL(string: "http://example.test/created")!, URL(string: "http://example.test/cl")!]])
        } else {
            #expect(invalidated.isEmpty)
        }
        #expect(!actions.contains { if case .store = $0 { return true } else { return false } }, "never stored")
        #expect(!actions.contains { if case .remove = $0 { return true } else { return false } }, "nothing else removed")
    }

    struct LocationRow: Sendable, CustomTestStringConvertible {
        let name: String
        let location: String?
        let contentLocation: String?
        let extra: [String]
        var testDescription: String { name }
    }

    static let locationRows: [LocationRow] = [
        LocationRow(name: "relative path", location: "/a", contentLocation: nil, extra: ["http://example.test/a"]),
        LocationRow(name: "relative to the request's path", location: "b?x=1", contentLocation: nil, extra: ["http://example.test/b?x=1"]),
        LocationRow(name: "absolute, same origin, host case differs", location: "http://EXAMPLE.test/c", contentLocation: nil,
                    extra: ["http://EXAMPLE.test/c"]),
        LocationRow(name: "both fields", location: "/a", contentLocation: "/b", extra: ["http://example.test/a", "http://example.test/b"]),
        LocationRow(name: "both the same URL: listed once", location: "/a", contentLocation: "/a", extra: ["http://example.test/a"]),
        LocationRow(name: "the request's own URL: listed once", location: "/items?page=1", contentLocation: nil, extra: []),
        LocationRow(name: "another host is never invalidated", location: "http://other.test/a", contentLocation: nil, extra: []),
        LocationRow(name: "another port is never invalidated", location: "http://example.test:8080/a", contentLocation: nil, extra: []),
        LocationRow(name: "another scheme is never invalidated", location: "https://example.test/a", contentLocation: nil, extra: []),
        LocationRow(name: "garbage is ignored", location: "http://[::1", contentLocation: "http://", extra: []),
    ]

    @Test("RFC 9111 §4.4: the same-origin URLs in Location and Content-Location are invalidated too, no others",
          arguments: locationRows)
    func invalidatedURLs(row: LocationRow) {
        var headers: [String: String] = [:]
        if let location = row.location { headers["Location"] = location }
        if let contentLocation = row.contentLocation { headers["Content-Location"] = contentLocation }
        let urls = CacheTransaction.invalidatedURLs(request: CacheDecisionTests.request("POST"),
                                                    response: ResponseHead(statusCode: 201, headers: headers, url: Self.url))
        #expect(urls.map(\.absoluteString) == [Self.url.absoluteString] + row.extra)
    }
}
