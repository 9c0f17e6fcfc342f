import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Answers the caller from an entry, unless the answer is a redirect to follow or a
    /// challenge to answer first.
    func serve(_ entry: CacheEntry, form: ServeForm, disposition: Disposition) {
        guard let caller else { return }
        let url = state.withLock { $0.hop.request.url } ?? entry.url
        let (response, range) = binding.builtResponses.response(for: entry, url: url, form: form, disposition: disposition,
                                                               cacheName: cache.configuration.cacheName)
        let body = range.count == entry.body.count ? entry.body : entry.body.subdata(in: range)
        if let kind = interception(for: response, caller) {
            return resolve(Caller.Held(kind: kind, response: response, body: body), caller)
        }
        caller.saveCredentialIfUsed(binding: binding)
        binding.count(servedFromStore: body.count, servedThroughNoVarySearch: disposition.noVarySearch ? 1 : 0)
        caller.delivery.deliver(response, body: body)
    }

    /// Gives the caller the network's response head, or holds it while a redirect or a
    /// challenge is decided (its body is held with it).
    func respond(_ head: ResponseHead, disposition: Disposition, hop: Hop) {
        guard let caller else { return }
        let response = HTTPURLResponse(Answers.fromNetwork(head, disposition: disposition, cacheName: cache.configuration.cacheName))
        if let kind = interception(for: response, caller) {
            caller.state.withLock { $0.held = Caller.Held(kind: kind, response: response) }
            return
        }
        caller.delivery.respond(response)
    }

    /// Ends the caller's answer, or decides the response held.
    func finish() {
        guard let caller else { return }
        if let held = caller.takeHeld() { return resolve(held, caller) }
        caller.saveCredentialIfUsed(binding: binding)
        caller.delivery.finish()
    }

    /// Whether a response is held back: a redirect to follow, or a challenge Foundation's own
    /// HTTP class would raise.
    private func interception(for response: HTTPURLResponse, _ caller: Caller) -> Caller.Held.Kind? {
        guard caller.facts != nil, (300..<400).contains(response.statusCode) || response.statusCode == 401 else { return nil }
        let (request, stopped, direct) = state.withLock { ($0.hop.request, $0.stopped, $0.forwardedDirectly != nil) }
        guard !stopped else { return nil }
        // Foundation's own class sent it (`DirectForward`) and followed what it would follow.
        if !direct, let next = Redirects.request(after: ResponseHead(response), from: request) { return .redirect(next) }
        if response.statusCode == 401, let challenge = Challenges.parse(response.value(forHTTPHeaderField: "WWW-Authenticate")) {
            return .challenge(challenge)
        }
        return nil
    }

    private func resolve(_ held: Caller.Held, _ caller: Caller) {
        // A redirect or a challenge asks the caller's delegate: know it (a hit answered inside
        // `startLoading` has not read it yet, and is still on the task's work queue here).
        caller.facts?.load()
        switch held.kind {
        case .redirect(let next): askAboutRedirect(held, next: next, caller)
        case .challenge(let challenge): answerChallenge(challenge, held: held, caller)
        }
    }

    /// Starts the next request of the exchange (after a redirect, or with credentials): a
    /// transaction of its own, with its own key and lookup.
    func startHop(_ request: URLRequest, body: HopBody) {
        cache.ioQueue(for: request.url?.absoluteString ?? "").async {
            var hop = Hop(request, body: body, binding: self.binding)
            hop.bodyDigest = self.bodyDigest(of: request, body: body)
            guard let key = try? self.binding.key(for: request, bodyDigest: hop.bodyDigest) else {
                return self.caller?.delivery.fail(HTTPCachingError.storeUnavailableForCredentials) ?? ()
            }
            let (entry, other) = self.cache.lookup(key, headers: hop.headers)
            let proceed = self.state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.hop = hop
                state.forwarded = nil
                state.stored = nil
                state.resentAfterWaiting = false
                state.hopNumber += 1
                return true
            }
            if proceed { self.start(key: key, entry: entry, otherVariant: other) }
        }
    }
}
