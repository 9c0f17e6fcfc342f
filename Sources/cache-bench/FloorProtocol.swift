import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The best any URLProtocol-based cache can do: a canned response of the right size from
/// memory, with no lookup beyond one dictionary read.
final class FloorProtocol: URLProtocol {
    /// Bodies by URL path, each filled before any request for it, while no request runs.
    nonisolated(unsafe) static var bodies: [String: Data] = [:]
    /// The headers every canned response carries.
    static let headers = ["Content-Type": "application/octet-stream"]

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let url = request.url!
        let body = Self.bodies[url.path] ?? Data()
        let response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: Self.headers)!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}
