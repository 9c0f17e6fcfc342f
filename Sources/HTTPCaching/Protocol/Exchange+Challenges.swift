import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Answers a Basic challenge as Foundation's own HTTP class would: asks the caller's
    /// delegate (proposing a credential from the session's credential storage), or without a
    /// delegate uses the stored credential; retries with the credential given, cancels the task
    /// when told to (after handing it the 401, as Foundation has), and delivers the 401 when
    /// nothing answers.
    func answerChallenge(_ challenge: Challenges.Challenge, held: Caller.Held, _ caller: Caller) {
        guard let url = held.response.url, let host = url.host, let scheme = url.scheme else { return caller.deliverHeld(held) }
        let space = URLProtectionSpace(host: host, port: url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme,
                                       realm: challenge.realm, authenticationMethod: challenge.method)
        let (failures, last) = caller.state.withLock { state -> (Int, URLCredential?) in
            defer { state.challenges += 1 }
            return (state.challenges, state.lastCredential?.credential)
        }
        var proposed = caller.credentialStorage(binding: binding).flatMap { Challenges.storedCredential(in: $0, for: space) }
        if let candidate = proposed, last == candidate { proposed = nil }
        guard let (session, delegate, task) = caller.askable() else {
            if let proposed { return retry(with: proposed, space: space, held: held, caller) }
            return caller.deliverHeld(held)
        }
        let authentication = URLAuthenticationChallenge(protectionSpace: space, proposedCredential: proposed,
                                                        previousFailureCount: failures, failureResponse: held.response,
                                                        error: nil, sender: ChallengeSender())
        let box = UncheckedBox((session, delegate, task, authentication, proposed))
        session.delegateQueue.addOperation {
            let (session, delegate, task, authentication, offered) = box.value
            delegate.urlSession(session, task: task, didReceive: authentication) { disposition, credential in
                switch disposition {
                case .useCredential:
                    if let credential { self.retry(with: credential, space: space, held: held, caller) } else { caller.deliverHeld(held) }
                case .performDefaultHandling:
                    if let offered { self.retry(with: offered, space: space, held: held, caller) } else { caller.deliverHeld(held) }
                case .cancelAuthenticationChallenge, .rejectProtectionSpace:
                    caller.handOverThenCancel(held, task: task)
                @unknown default:
                    caller.deliverHeld(held)
                }
            }
        }
    }

    /// Sends the request again with a credential (Basic, as Foundation does on Linux).
    private func retry(with credential: URLCredential, space: URLProtectionSpace, held: Caller.Held, _ caller: Caller) {
        guard space.authenticationMethod == NSURLAuthenticationMethodHTTPBasic else { return caller.deliverHeld(held) }
        let token = Data("\(credential.user ?? ""):\(credential.password ?? "")".utf8).base64EncodedString()
        caller.state.withLock { state in
            state.lastCredential = (space, credential)
            state.credentialToSave = (space, credential)
        }
        let (request, body) = state.withLock { ($0.hop.request, $0.hop.body) }
        var next = request
        next.setValue("Basic \(token)", forHTTPHeaderField: "Authorization")
        startHop(next, body: body.again)
    }
}

/// A challenge's sender: Foundation's own on Linux ignores these calls too (the delegate's
/// completion handler carries the answer).
private final class ChallengeSender: NSObject, URLAuthenticationChallengeSender, @unchecked Sendable {
    func use(_ credential: URLCredential, for challenge: URLAuthenticationChallenge) {}
    func continueWithoutCredential(for challenge: URLAuthenticationChallenge) {}
    func cancel(_ challenge: URLAuthenticationChallenge) {}
    func performDefaultHandling(for challenge: URLAuthenticationChallenge) {}
    func rejectProtectionSpaceAndContinue(with challenge: URLAuthenticationChallenge) {}
}
