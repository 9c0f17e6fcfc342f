import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Asks the caller's delegate about a redirect (`willPerformHTTPRedirection`), as
    /// Foundation does, then follows it, follows the request the delegate gave, or delivers the
    /// 3xx itself when the delegate refuses.
    func askAboutRedirect(_ held: Caller.Held, next: URLRequest, _ caller: Caller) {
        // As Foundation: the 21st redirect fails before the delegate is asked about it.
        let tooMany = caller.state.withLock { state -> Bool in
            state.redirects += 1
            return state.redirects > 20
        }
        if tooMany {
            return caller.delivery.fail(URLError(.httpTooManyRedirects, userInfo: [NSLocalizedDescriptionKey: "too many HTTP redirects"]))
        }
        // Without a delegate, Foundation reads the cookie storage again for the next request.
        guard let (session, delegate, task) = caller.askable() else { return follow(cookieJar.configured(next), after: held) }
        let box = UncheckedBox((session, delegate, task, held.response))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2, willPerformHTTPRedirection: box.value.3, newRequest: next) { request in
                if let request { self.follow(request, after: held) } else { caller.deliverHeld(held) }
            }
        }
    }

    private func follow(_ request: URLRequest, after held: Caller.Held) {
        var next = request
        let previous = state.withLock { $0.hop }
        // 303, and 301/302 after a POST, change the method to GET and drop the body.
        let keepsBody = next.sentMethod == previous.request.sentMethod
            && [307, 308].contains(held.response.statusCode)
        if !keepsBody { next.httpBody = nil }
        startHop(next, body: keepsBody ? previous.body.again : .none)
    }
}
