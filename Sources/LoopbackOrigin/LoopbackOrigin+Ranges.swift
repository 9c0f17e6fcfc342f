import Foundation

extension LoopbackOrigin {
    /// Answers a request for `representation` as an origin that supports byte ranges does
    /// (RFC 9110 sections 13 and 14): `304` when `If-None-Match` names `etag` (`*` too); a
    /// single satisfiable `bytes=` range as `206` with its `Content-Range`; one that starts
    /// past the end as `416` with `Content-Range: bytes */length`; anything else (no `Range`,
    /// several ranges, another unit, an `If-Range` that does not match) as `200` with the
    /// whole. `Accept-Ranges: bytes`, the validators and `fields` go on every answer.
    /// - Parameters:
    ///   - request: the request to answer.
    ///   - representation: the whole representation's bytes.
    ///   - etag: its entity tag, sent as given (`"v1"`, `W/"v1"`). The default is none.
    ///   - lastModified: its `Last-Modified` value, sent as given. The default is none.
    ///   - fields: more header fields (`Cache-Control`, `Date`, ...). The default is none.
    /// - Returns: the response.
    public static func rangedResponse(to request: Request, representation: Data, etag: String? = nil,
                                      lastModified: String? = nil,
                                      fields: [(name: String, value: String)] = []) -> Response {
        var headers: [(name: String, value: String)] = [("Accept-Ranges", "bytes")]
        if let etag { headers.append(("ETag", etag)) }
        if let lastModified { headers.append(("Last-Modified", lastModified)) }
        headers += fields
        if let etag, let wanted = request.header("If-None-Match"),
           wanted.split(separator: ",").contains(where: { tag(String($0)) == tag(etag) || $0.trimmingCharacters(in: .whitespaces) == "*" }) {
            return Response(status: 304, headers: headers)
        }
        let length = representation.count
        guard let field = request.header("Range"), ifRangeMatches(request.header("If-Range"), etag: etag, lastModified: lastModified),
              let bytes = singleRange(field, length: length) else {
            return Response(status: 200, headers: headers, body: representation)
        }
        guard let bytes = bytes else {
            return Response(status: 416, headers: headers + [("Content-Range", "bytes */\(length)")])
        }
        headers.append(("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(length)"))
        return Response(status: 206, headers: headers, body: representation.subdata(in: bytes.lowerBound..<(bytes.upperBound + 1)))
    }

    /// Routes a path to `representation`, answered as `rangedResponse(to:representation:etag:lastModified:fields:)` says.
    /// - Parameters:
    ///   - path: the path, without query.
    ///   - representation: the whole representation's bytes.
    ///   - etag: its entity tag, sent as given. The default is none.
    ///   - lastModified: its `Last-Modified` value. The default is none.
    ///   - fields: more header fields. The default is none.
    public func routeRanged(_ path: String, representation: Data, etag: String? = nil, lastModified: String? = nil,
                            fields: [(name: String, value: String)] = []) {
        route(path) { request, _ in
            Self.rangedResponse(to: request, representation: representation, etag: etag, lastModified: lastModified,
                                fields: fields)
        }
    }

    /// An entity tag without its weakness prefix, for `If-None-Match`'s weak comparison.
    private static func tag(_ value: String) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("W/") ? String(trimmed.dropFirst(2)) : trimmed
    }

    /// Whether an `If-Range` lets the range be answered: none, the same strong tag, or the
    /// same date.
    private static func ifRangeMatches(_ value: String?, etag: String?, lastModified: String?) -> Bool {
        guard let value = value?.trimmingCharacters(in: .whitespaces) else { return true }
        if value.hasPrefix("\"") { return etag == value }
        return lastModified == value
    }

    /// One `bytes=` range of a body of `length` bytes: nil when the field is not one such
    /// range (the whole is sent); `.some(nil)` when it starts past the end (416).
    private static func singleRange(_ field: String, length: Int) -> ClosedRange<Int>?? {
        let text = field.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes="), !text.contains(",") else { return nil }
        let parts = text.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let first = Int(parts[0]), last = Int(parts[1])
        switch (parts[0].isEmpty, parts[1].isEmpty) {
        case (true, false):
            guard let suffix = last else { return nil }
            guard suffix > 0, length > 0 else { return .some(nil) }
            return .some(max(0, length - suffix)...(length - 1))
        case (false, _):
            guard let first, parts[1].isEmpty || (last ?? -1) >= first else { return nil }
            guard first < length else { return .some(nil) }
            return .some(first...min(last ?? (length - 1), length - 1))
        default:
            return nil
        }
    }
}
