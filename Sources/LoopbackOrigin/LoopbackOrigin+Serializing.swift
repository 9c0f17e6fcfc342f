import Foundation

// The bytes of a response: status line, header section with its framing field, and body.

extension LoopbackOrigin {
    /// How a response's body is delimited.
    enum Framing: Equatable {
        /// `Content-Length` (added unless given), for this many bytes.
        case length(Int)
        /// `Transfer-Encoding: chunked` (added unless a Transfer-Encoding is given).
        case chunked
        /// No length; `Connection: close` (added unless a Connection field is given).
        case untilClose
    }

    /// Whether a status may carry a body: not 1xx, 204 or 304 (RFC 9110 §6.4.1).
    static func statusHasBody(_ status: Int) -> Bool {
        !(100...199).contains(status) && status != 204 && status != 304
    }

    /// The status line and header section of a response, with the framing field added unless
    /// the response gives its own (or its status has no body).
    static func head(_ response: Response, framing: Framing) -> Data {
        var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        var given: Set<String> = []
        for (name, value) in response.headers {
            given.insert(HTTPRequestParser.asciiLowercased(name))
            head += "\(name): \(value)\r\n"
        }
        if statusHasBody(response.status) {
            switch framing {
            case .length(let length):
                if !given.contains("content-length") { head += "Content-Length: \(length)\r\n" }
            case .chunked:
                if !given.contains("transfer-encoding") { head += "Transfer-Encoding: chunked\r\n" }
            case .untilClose:
                if !given.contains("connection") { head += "Connection: close\r\n" }
            }
        }
        head += "\r\n"
        return Data(head.utf8)
    }

    /// A whole fixed response: head and, unless the method or status has none, body.
    static func serialize(_ response: Response, method: String = "GET") -> Data {
        var data = head(response, framing: .length(response.body.count))
        if method != "HEAD" && statusHasBody(response.status) { data.append(response.body) }
        return data
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 410: "Gone"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
