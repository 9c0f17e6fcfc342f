import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which request a redirect leads to, by the rules Foundation's own HTTP class applies on
/// Linux (swift-corelibs-foundation's `_HTTPURLProtocol.redirectRequest`), so a caching
/// session follows exactly what a plain one would.
enum Redirects {
    /// The request a 3xx leads to; nil if it does not redirect (not 301, 302, 303, 305, 307
    /// or 308, or no usable `Location`).
    static func request(after response: ResponseHead, from request: URLRequest) -> URLRequest? {
        guard let location = response.header("Location"), let target = URL(string: location) else { return nil }
        var next = request
        switch response.statusCode {
        case 301...302 where next.sentMethod == "POST", 303:
            // POST becomes GET; other methods are kept (but for 303).
            next.httpMethod = "GET"
            next.httpBody = nil
        case 301...302, 305...308:
            break
        default:
            return nil
        }
        if target.scheme != nil && target.host != nil {
            next.url = target
            return next
        }
        guard let from = request.url, var components = URLComponents(url: from, resolvingAgainstBaseURL: false) else { return nil }
        if target.host != nil {
            components.host = target.host
            components.port = target.port
        }
        components.path = target.path.hasPrefix("/") ? target.path : "/" + target.path
        components.percentEncodedQuery = target.query
        components.percentEncodedFragment = target.fragment
        guard let url = components.url else { return nil }
        next.url = url
        return next
    }
}
