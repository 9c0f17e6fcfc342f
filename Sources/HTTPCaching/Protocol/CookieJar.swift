import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A session's cookie settings, used as Foundation 6.3.1 uses them: a request gets the
/// storage's cookies for its URL when its task is made, and again when a redirect is followed
/// without a delegate (`URLSession._Configuration.setCookies(on:)`); a response's cookies go to
/// the storage unless the accept policy is `.never` (`_EasyHandle.setCookies(headerData:)`).
struct CookieJar: @unchecked Sendable {
    let setsCookies: Bool
    let acceptsCookies: Bool
    let storage: HTTPCookieStorage?

    init(_ configuration: URLSessionConfiguration) {
        setsCookies = configuration.httpShouldSetCookies
        acceptsCookies = configuration.httpCookieAcceptPolicy != .never
        storage = configuration.httpCookieStorage
    }

    /// `request` with the storage's cookies for its URL in its `Cookie` field, when there are
    /// any (an existing field is kept when there are none, as Foundation keeps it).
    func configured(_ request: URLRequest) -> URLRequest {
        guard setsCookies, let storage, let url = request.url,
              let value = storage.cookies(for: url).flatMap({ HTTPCookie.requestHeaderFields(with: $0)["Cookie"] }),
              !value.isEmpty else { return request }
        var request = request
        request.setValue(value, forHTTPHeaderField: "Cookie")
        return request
    }

    /// Puts the cookies `response` sets into the storage.
    func store(from response: HTTPURLResponse) {
        guard acceptsCookies, let storage, let url = response.url else { return }
        var fields: [String: String] = [:]
        for case let (name as String, value as String) in response.allHeaderFields { fields[name] = value }
        let cookies = HTTPCookie.cookies(withResponseHeaderFields: fields, for: url)
        if !cookies.isEmpty { storage.setCookies(cookies, for: url, mainDocumentURL: nil) }
    }

    /// Whether both keep their cookies in one storage.
    func sharesStorage(with other: CookieJar) -> Bool {
        storage === other.storage
    }
}
