import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension FidelityRuleTests {
    // MARK: - RFC 9211: Cache-Status

    struct StatusRow: Sendable, CustomTestStringConvertible {
        let name: String
        let disposition: Disposition
        let expected: String
        var testDescription: String { name }
    }

    static let statusRows: [StatusRow] = [
        StatusRow(name: "hit", disposition: Disposition(status: .fresh, hit: true, ttl: 42.9, age: 17), expected: "HTTPCaching; hit; ttl=42"),
        StatusRow(name: "stale hit: negative ttl", disposition: Disposition(status: .stale, hit: true, ttl: -3.2), expected: "HTTPCaching; hit; ttl=-4"),
        StatusRow(name: "uri-miss, stored", disposition: Disposition(status: .miss, forward: .uriMiss, forwardStatus: 200, stored: true, ttl: 60),
                  expected: "HTTPCaching; fwd=uri-miss; fwd-status=200; ttl=60; stored"),
        StatusRow(name: "vary-miss", disposition: Disposition(status: .miss, forward: .varyMiss, forwardStatus: 200),
                  expected: "HTTPCaching; fwd=vary-miss; fwd-status=200"),
        StatusRow(name: "miss", disposition: Disposition(status: .miss, forward: .miss, forwardStatus: 200), expected: "HTTPCaching; fwd=miss; fwd-status=200"),
        StatusRow(name: "stale, revalidated", disposition: Disposition(status: .revalidated, forward: .stale, forwardStatus: 304, stored: true, ttl: 60),
                  expected: "HTTPCaching; fwd=stale; fwd-status=304; ttl=60; stored"),
        StatusRow(name: "request", disposition: Disposition(status: .expired, forward: .request, forwardStatus: 200),
                  expected: "HTTPCaching; fwd=request; fwd-status=200"),
        StatusRow(name: "method", disposition: Disposition(status: .bypass, forward: .method, forwardStatus: 201), expected: "HTTPCaching; fwd=method; fwd-status=201"),
        StatusRow(name: "bypass with a token detail", disposition: Disposition(status: .bypass, forward: .bypass, forwardStatus: 500, detail: "not-stored-status"),
                  expected: "HTTPCaching; fwd=bypass; fwd-status=500; detail=not-stored-status"),
        StatusRow(name: "collapsed", disposition: Disposition(status: .miss, forward: .uriMiss, forwardStatus: 200, stored: true, collapsed: true),
                  expected: "HTTPCaching; fwd=uri-miss; fwd-status=200; stored; collapsed"),
        StatusRow(name: "fallback: a detail that is not a token is a string",
                  disposition: Disposition(status: .fallback, forward: .stale, forwardStatus: 503, detail: "the origin answered 503"),
                  expected: "HTTPCaching; fwd=stale; fwd-status=503; detail=\"the origin answered 503\""),
        StatusRow(name: "quotes and backslashes escaped, controls dropped",
                  disposition: Disposition(status: .bypass, detail: "a \"b\" \\ c\u{7}"), expected: "HTTPCaching; detail=\"a \\\"b\\\" \\\\ c\""),
        StatusRow(name: "a status outside 100-999 is left out", disposition: Disposition(status: .bypass, forward: .bypass, forwardStatus: 1000),
                  expected: "HTTPCaching; fwd=bypass"),
        StatusRow(name: "an infinite ttl is left out", disposition: Disposition(status: .fresh, hit: true, ttl: .infinity), expected: "HTTPCaching; hit"),
    ]

    @Test("RFC 9211 §2: the member names the cache, then hit or fwd, fwd-status, ttl, stored, collapsed, detail", arguments: statusRows)
    func cacheStatusMember(row: StatusRow) {
        #expect(CacheStatusField.member(row.disposition, cacheName: "HTTPCaching") == row.expected)
    }

    @Test("RFC 9211 §2: the cache appends its member after those already in the field; a name that is not a token is quoted")
    func cacheStatusList() {
        #expect(CacheStatusField.appending("HTTPCaching; hit", to: "OriginCache; fwd=uri-miss") == "OriginCache; fwd=uri-miss, HTTPCaching; hit")
        #expect(CacheStatusField.appending("HTTPCaching; hit", to: "  ") == "HTTPCaching; hit")
        #expect(CacheStatusField.member(Disposition(status: .fresh, hit: true), cacheName: "my cache") == "\"my cache\"; hit")
    }

    @Test("RFC 9211: the Cache-Status member of each kind of answer")
    func cacheStatus() {
        func member(_ disposition: Disposition) -> String { CacheStatusField.member(disposition, cacheName: "HTTPCaching") }
        #expect(member(Disposition(status: .fresh, hit: true, ttl: 42.7, age: 17)) == "HTTPCaching; hit; ttl=42")
        #expect(member(Disposition(status: .stale, hit: true, ttl: -3.2)) == "HTTPCaching; hit; ttl=-4")
        #expect(member(Disposition(status: .miss, forward: .uriMiss, forwardStatus: 200, stored: true)) == "HTTPCaching; fwd=uri-miss; fwd-status=200; stored")
        #expect(member(Disposition(status: .miss, forward: .varyMiss, forwardStatus: 200, stored: true, collapsed: true))
                == "HTTPCaching; fwd=vary-miss; fwd-status=200; stored; collapsed")
        #expect(member(Disposition(status: .fallback, forward: .stale, detail: "the origin answered 503")) == "HTTPCaching; fwd=stale; detail=\"the origin answered 503\"")
        #expect(CacheStatusField.member(Disposition(status: .bypass, forward: .method), cacheName: "my cache") == "\"my cache\"; fwd=method")
        #expect(member(Disposition(status: .miss, detail: "only-if-cached")) == "HTTPCaching; detail=only-if-cached", "a 504 the cache made")
        #expect(CacheStatusField.appending("HTTPCaching; hit", to: "Upstream; fwd=miss") == "Upstream; fwd=miss, HTTPCaching; hit")
    }
}
