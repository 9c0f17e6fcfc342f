import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Authentication challenges reach the caller's delegate, or its credential storage, exactly
/// as without the cache; nothing ever hangs; a stored answer never serves other credentials.
@Suite("Authentication through the cache")
struct AuthenticationTests {
    static let user = "alice", password = "wonderland"
    /// Every kind of task through the cache, and the kinds Foundation alone serves the same way
    /// without it (it never asks a `data(for:delegate:)` delegate and would wait forever).
    static let withAndWithoutCache = TaskKind.allCases.map { ($0, true) } + TaskKind.foundationKinds.map { ($0, false) }

    /// An origin with `/private` behind Basic authentication: 200 "secret", storable.
    private func origin(_ h: Harness) -> LoopbackOrigin.BasicAuthRoute {
        h.origin.routeBasicAuth("/private", user: Self.user, password: Self.password,
                                response: .init(headers: [("Cache-Control", "max-age=600")], text: "secret"))
    }

    private func space(_ h: Harness) -> URLProtectionSpace {
        URLProtectionSpace(host: "127.0.0.1", port: h.origin.port, protocol: "http", realm: "loopback",
                           authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
    }

    private static func answer(_ user: String, _ password: String) -> @Sendable (URLAuthenticationChallenge)
        -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        { _ in (.useCredential, URLCredential(user: user, password: password, persistence: .forSession)) }
    }

    @Test("a delegate answering with a credential gets the 200, as without the cache; the credential is saved as Foundation saves it",
          arguments: withAndWithoutCache)
    func delegateAnswers(kind: TaskKind, caching: Bool) async throws {
        let h = try Harness()
        let route = origin(h)
        let probe = ProbeDelegate(onChallenge: Self.answer(Self.user, Self.password))
        let storage = URLCredentialStorage()
        let configure: (URLSessionConfiguration) -> Void = { $0.urlCredentialStorage = storage }
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/private")), probe: probe) { delegate in
            h.session(caching: caching, delegate, configure: configure)
        })
        #expect(outcome.error == nil)
        #expect(outcome.status == 200)
        if caching || kind != .delegate {
            #expect(outcome.text == "secret")
        } else {
            // Foundation 6.3.1 alone hands a delegate the 401's body too, before the 200's.
            #expect(outcome.text == "unauthorized\nsecret")
        }
        let challenges = probe.value.challenges
        #expect(challenges.count == 1, "the delegate is asked once")
        #expect(challenges.first?.method == NSURLAuthenticationMethodHTTPBasic && challenges.first?.realm == "loopback")
        #expect(challenges.first?.previousFailureCount == 0 && challenges.first?.failureStatus == 401)
        #expect(route.rejected == 1 && route.accepted == 1)
        #expect(storedCredentials(storage, host: "127.0.0.1", port: h.origin.port, realm: "loopback")[Self.user]?.password
                    == Self.password, "Foundation keeps the credential that worked in the session's storage")
        if caching {
            #expect(outcome.response?.cacheStatus == .miss)
            #expect(h.recorder.count(.stored) == 1, "the authorized answer is stored, under its credentials")
        }
    }

    @Test("a delegate cancelling the challenge cancels the task, as without the cache", arguments: withAndWithoutCache)
    func delegateCancels(kind: TaskKind, caching: Bool) async throws {
        let h = try Harness()
        let route = origin(h)
        let probe = ProbeDelegate(onChallenge: { _ in (.cancelAuthenticationChallenge, nil) })
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/private")), probe: probe) { delegate in
            h.session(caching: caching, delegate)
        })
        #expect(outcome.errorCode == NSURLErrorCancelled)
        #expect(probe.value.challenges.count == 1)
        #expect(route.attempts == 1)
    }

    @Test("a delegate that cancels or rejects the challenge: the task ends cancelled with the 401 (head, challenge field, body) as its response, the same with and without the cache",
          arguments: [URLSession.AuthChallengeDisposition.cancelAuthenticationChallenge, .rejectProtectionSpace])
    func refusedChallengeKeepsThe401(disposition: URLSession.AuthChallengeDisposition) async throws {
        let h = try Harness()
        let route = origin(h)
        var seen: [String] = []
        for caching in [false, true] {
            let probe = ProbeDelegate(onChallenge: { _ in (disposition, nil) })
            let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/private")), probe: probe) { delegate in
                h.session(caching: caching, delegate)
            })
            seen.append("\(outcome.status.map(String.init) ?? "none") \(outcome.response?.value(forHTTPHeaderField: "WWW-Authenticate") ?? "-") "
                        + "\(outcome.text.trimmingCharacters(in: .whitespacesAndNewlines)) \(outcome.errorCode.map(String.init) ?? "-")")
            #expect(probe.value.challenges.count == 1)
        }
        #expect(seen[0].hasPrefix("401 Basic") && seen[0].hasSuffix(" \(NSURLErrorCancelled)"), "Foundation alone: \(seen[0])")
        #expect(seen[1] == seen[0], "the caller sees what it sees without the cache")
        #expect(route.attempts == 2 && route.accepted == 0)
    }

    @Test("a wrong credential is challenged again with the failure counted; the right one then succeeds",
          arguments: [true, false])
    func wrongThenRight(caching: Bool) async throws {
        let h = try Harness()
        let route = origin(h)
        let probe = ProbeDelegate(onChallenge: { challenge in
            let password = challenge.previousFailureCount == 0 ? "wrong" : Self.password
            return (.useCredential, URLCredential(user: Self.user, password: password, persistence: .forSession))
        })
        let outcome = try #require(await perform(.delegate, URLRequest(url: h.origin.url("/private")), probe: probe) { delegate in
            h.session(caching: caching, delegate)
        })
        #expect(outcome.status == 200)
        #expect(caching ? outcome.text == "secret" : outcome.text.hasSuffix("secret"), "Foundation alone adds the 401 bodies")
        #expect(probe.value.challenges.map(\.previousFailureCount) == [0, 1])
        #expect(route.rejected == 2 && route.accepted == 1)
    }

    @Test("no delegate: a credential in the session's credential storage answers (Foundation 6.3.1 alone never finds it and waits)")
    func storageAnswers() async throws {
        let h = try Harness()
        let route = origin(h)
        let storage = URLCredentialStorage()
        storage.set(URLCredential(user: Self.user, password: Self.password, persistence: .forSession), for: space(h))
        let configure: (URLSessionConfiguration) -> Void = { $0.urlCredentialStorage = storage }
        let session = h.plainCachingSession(configure: configure)
        defer { session.finishTasksAndInvalidate() }
        let result = try #require(await fetchOutcome(session, URLRequest(url: h.origin.url("/private"))))
        let answer = try result.get()
        #expect(answer.response.statusCode == 200 && answer.text == "secret")
        #expect(route.rejected == 1 && route.accepted == 1)
    }

    @Test("nothing can answer (no delegate, no credential): the 401 is delivered at once, never a hang",
          arguments: TaskKind.allCases)
    func nothingAnswers(kind: TaskKind) async throws {
        let h = try Harness()
        let route = origin(h)
        let probe = ProbeDelegate() // default handling, and no credential anywhere
        let outcome = try #require(await perform(kind, URLRequest(url: h.origin.url("/private")), probe: probe, timeout: 5) { delegate in
            h.delegateSession(delegate)
        }, "the task ends")
        #expect(outcome.status == 401 && outcome.text == "unauthorized\n")
        #expect(outcome.response?.value(forHTTPHeaderField: "WWW-Authenticate") == nil,
                "delivered without the field that makes Foundation 6.3.1 start a challenge of its own and wait forever")
        #expect(route.attempts == 1)
        #expect(probe.value.challenges.count == 1, "the delegate was asked, and chose the default handling")

        let bare = h.plainCachingSession()
        defer { bare.finishTasksAndInvalidate() }
        let unanswered = try #require(await fetchOutcome(bare, URLRequest(url: h.origin.url("/private")), timeout: 5))
        #expect(unanswered.response?.response.statusCode == 401, "no delegate at all: the 401, promptly")
    }

    @Test("a stored authorized answer serves the same credentials again, and never a request with other credentials or none")
    func storedAnswerKeepsToItsCredentials() async throws {
        let h = try Harness()
        let route = origin(h)
        func request(answering probe: ProbeDelegate) async throws -> Outcome {
            try #require(await perform(.delegate, URLRequest(url: h.origin.url("/private")), probe: probe) { h.delegateSession($0) })
        }
        let first = try await request(answering: ProbeDelegate(onChallenge: Self.answer(Self.user, Self.password)))
        #expect(first.text == "secret" && first.response?.cacheStatus == .miss)

        let again = try await request(answering: ProbeDelegate(onChallenge: Self.answer(Self.user, Self.password)))
        #expect(again.text == "secret" && again.response?.cacheStatus == .fresh, "the same credentials: served from the store")
        #expect(route.accepted == 1, "the origin did not see the second authorized request")

        let bob = ProbeDelegate(onChallenge: { challenge in
            challenge.previousFailureCount == 0
                ? (.useCredential, URLCredential(user: "bob", password: "builder", persistence: .none))
                : (.cancelAuthenticationChallenge, nil)
        })
        let other = try await request(answering: bob)
        #expect(other.errorCode == NSURLErrorCancelled, "bob's credentials went to the origin and were refused")
        #expect(bob.value.challenges.count == 2)

        let anonymous = h.plainCachingSession()
        defer { anonymous.finishTasksAndInvalidate() }
        let none = try #require(await fetchOutcome(anonymous, URLRequest(url: h.origin.url("/private"))))
        #expect(none.response?.response.statusCode == 401, "no credentials: never alice's stored answer")
        #expect(route.accepted == 1 && route.rejected == 5)
    }
}
