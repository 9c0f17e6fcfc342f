import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Every 401 reaches the caller as Foundation 6.3.1 delivers it: `WWW-Authenticate` intact,
/// and a challenge only where Foundation's own HTTP class raises one (a `Basic` challenge with
/// a realm). OAuth clients read `error="invalid_token"` from a Bearer challenge.
@Suite("Every 401 as Foundation delivers it")
struct AuthenticationSchemeTests {
    /// `WWW-Authenticate` values Foundation raises no challenge for.
    static let unchallenged = [
        "Bearer realm=\"api\", error=\"invalid_token\", error_description=\"The access token expired\"",
        "Negotiate",
        "Digest realm=\"api\", qop=\"auth\", nonce=\"dcd98b7102dd2f0e8b11d0f600bfb0c093\", opaque=\"5ccc069c403ebaf9f0171e9517f40e41\"",
        "Mutual realm=\"x\"",
        "Basic charset=\"UTF-8\"",
        "Bearer, Negotiate",
        "Bearer realm=\"a, Basic\"",
    ]

    static let kinds = TaskKind.foundationKinds

    func route(_ h: Harness, _ path: String, _ value: String) {
        h.origin.route(path, response: .init(status: 401, headers: [("WWW-Authenticate", value)], text: "denied"))
    }

    @Test("Bearer, Negotiate, Digest, unknown schemes, Basic without a realm: the 401 with its field, no challenge, with or without a delegate",
          arguments: unchallenged, kinds)
    func unchallengedSchemes(value: String, kind: TaskKind) async throws {
        let h = try Harness()
        var seen: [[String?]] = []
        for caching in [false, true] {
            let path = "/auth-\(caching)"
            route(h, path, value)
            let probe = ProbeDelegate()
            let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url(path)), probe: probe, timeout: 5) { delegate in
                h.session(caching: caching, delegate)
            }, "the task ends (caching \(caching))")
            #expect(probe.value.challenges.isEmpty, "no challenge (caching \(caching))")
            #expect(h.origin.requestCount(path) == 1)
            seen.append([outcome.status.map(String.init), outcome.response?.value(forHTTPHeaderField: "WWW-Authenticate"), outcome.text])
        }
        #expect(seen[0] == seen[1])
        #expect(seen[1] == ["401", value, "denied"])
    }

    @Test("no delegate at all, completion handler and data(for:): the same 401 with the field", arguments: unchallenged)
    func withoutDelegate(value: String) async throws {
        let h = try Harness()
        route(h, "/bare", value)
        for session in [h.plainCachingSession(), uncachedSession()] {
            defer { session.finishTasksAndInvalidate() }
            let handled = try #require(await fetchOutcome(session, URLRequest(url: h.origin.url("/bare")), timeout: 5)?.response)
            #expect(handled.response.statusCode == 401 && handled.response.value(forHTTPHeaderField: "WWW-Authenticate") == value)
            let (data, response) = try await session.data(for: URLRequest(url: h.origin.url("/bare")))
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "WWW-Authenticate") == value && data == Data("denied".utf8))
        }
    }

    @Test("several challenges with a Basic one among them: Foundation's one Basic challenge, with its realm, and nothing else")
    func severalChallenges() async throws {
        let h = try Harness()
        let value = "Bearer realm=\"api\", Basic realm=\"fallback\""
        for caching in [false, true] {
            let path = "/both-\(caching)"
            route(h, path, value)
            let probe = ProbeDelegate(onChallenge: { _ in (.cancelAuthenticationChallenge, nil) })
            let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url(path)), probe: probe) { delegate in
                h.session(caching: caching, delegate)
            })
            #expect(outcome.errorCode == NSURLErrorCancelled, "caching \(caching)")
            #expect(probe.value.challenges.map(\.method) == [NSURLAuthenticationMethodHTTPBasic])
            #expect(probe.value.challenges.map(\.realm) == ["fallback"])
        }
    }

    @Test("the challenge parser finds what Foundation's finds", arguments: [
        ("Basic realm=\"x\"", "x"), ("basic REALM=x", "x"), ("Basic   realm = \"a \\\"b\\\"\"", "a \"b\""),
        ("Bearer, Basic realm=\"y\"", "y"), ("Basic realm=\"\"", ""), ("Basic realm", nil), ("Basic realm=\"open", nil),
        ("Digest realm=\"d\"", nil), ("Basic charset=\"UTF-8\", realm=\"z\"", "z"),
    ] as [(String, String?)])
    func parser(value: String, realm: String?) {
        let challenge = Challenges.parse(value)
        #expect(challenge?.realm == realm)
        #expect(challenge.map { $0.method == NSURLAuthenticationMethodHTTPBasic } ?? true)
    }
}
