import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response's status and header fields, as the network sent them: what the decision and the
/// transaction reason about, without Foundation's response type.
struct ResponseHead: Sendable, Equatable {
    var statusCode: Int
    var headers: [String: String]
    var url: URL

    init(statusCode: Int, headers: [String: String], url: URL) {
        self.statusCode = statusCode
        self.headers = headers
        self.url = url
    }

    init(_ response: HTTPURLResponse) {
        self.init(statusCode: response.statusCode, headers: response.headerFields,
                  url: response.url ?? URL(fileURLWithPath: "/"))
    }

    /// A header's value, the name compared case-insensitively.
    func header(_ name: String) -> String? {
        if let value = headers[name] { return value }
        return headers.first { $0.key.equalsIgnoringASCIICase(name) }?.value
    }

    /// The announced body length, exactly, if any and valid.
    var contentLength: Int? {
        HTTPFieldParsing.contentLength(header("Content-Length"))
    }
}

extension HTTPURLResponse {
    /// The header fields as strings (Foundation types them `[AnyHashable: Any]`): the
    /// dictionary Foundation keeps them in, read as it is (bridging it out and casting every
    /// field back cost a miss 4 µs), else through `allHeaderFields`.
    var headerFields: [String: String] {
        if let kept = StoredField.value(named: "_allHeaderFields", in: self) as? [String: String] { return kept }
        var fields: [String: String] = [:]
        for (name, value) in allHeaderFields {
            if let name = name as? String, let value = value as? String { fields[name] = value }
        }
        return fields
    }
}
