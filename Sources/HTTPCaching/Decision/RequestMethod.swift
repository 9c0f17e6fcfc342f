import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// The method as it goes out, GET when none is set. Methods are case-sensitive (RFC 9110
    /// section 9.1): Foundation writes GET, HEAD, POST, PUT, DELETE and CONNECT in capitals
    /// whatever the case given, and sends any other method as given, so `query` is not QUERY
    /// (it is a method the cache does not know, and unsafe).
    var sentMethod: String { httpMethod ?? "GET" }
}
