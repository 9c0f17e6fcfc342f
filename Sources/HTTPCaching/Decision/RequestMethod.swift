import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Methods as they go out. Methods are case-sensitive (RFC 9110 section 9.1), but Foundation
/// writes GET, HEAD, POST, PUT, DELETE and CONNECT in capitals whatever the case given
/// (`NSURLRequest`), and sends any other method as written: so `query` is not QUERY (it is a
/// method the cache does not know, and unsafe).
enum RequestMethod {
    private static let capitalized = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT"]

    /// A method as Foundation sends it.
    static func normalized(_ method: String) -> String {
        capitalized.first { $0.equalsIgnoringASCIICase(method) } ?? method
    }
}

extension URLRequest {
    /// The method as it goes out, GET when none is set: `httpMethod` is already in Foundation's
    /// spelling (`RequestMethod.normalized`; `BodyKeyingTests.methodCaseSensitive` pins it).
    var sentMethod: String { httpMethod ?? "GET" }
}
