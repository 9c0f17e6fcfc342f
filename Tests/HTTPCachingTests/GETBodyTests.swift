import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Foundation 6.3.1's own HTTP class fails a `GET` that carries a body before sending anything
/// (`NSURLErrorDataLengthExceedsMaximum`); through the cache it fails the same way, even when a
/// fresh entry is stored for its URL.
@Suite("A GET with a body")
struct GETBodyTests {
    enum Shape: String, CaseIterable, Sendable {
        case httpBody, emptyHTTPBody, stream, uploadedData, uploadedEmptyData, lowercaseGetWithBody, uploadWithRequestStream
    }

    @Test("fails as without the cache, with Foundation's error and nothing sent; an empty body is no body", arguments: Shape.allCases)
    func sameOutcome(_ shape: Shape) async throws {
        let h = try Harness()
        h.origin.route("/g", response: .init(headers: [("Cache-Control", "max-age=600")], text: "g"))
        _ = try await h.get("/g") // a fresh entry for the URL
        var seen: [Bool: String] = [:]
        var sent: [Bool: Int] = [:]
        for caching in [false, true] {
            let probe = ProbeDelegate() // gives no stream when a streamed upload asks
            let session = h.session(caching: caching, probe)
            defer { session.finishTasksAndInvalidate() }
            let before = h.origin.requestCount("/g")
            Self.task(shape, to: h.origin.url("/g"), on: session).resume()
            let state = try #require(await probe.finished())
            seen[caching] = Self.describe(state.error)
            sent[caching] = h.origin.requestCount("/g") - before
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        let refused = [.httpBody, .stream, .uploadedData, .uploadedEmptyData, .lowercaseGetWithBody].contains(shape)
        #expect(seen[false]?.hasPrefix("\(NSURLErrorDomain) \(NSURLErrorDataLengthExceedsMaximum)") == refused, "\(seen)")
        if refused { #expect(sent == [false: 0, true: 0], "nothing reaches the origin: \(sent)") }
    }

    /// The shape's task, not resumed.
    static func task(_ shape: Shape, to url: URL, on session: URLSession) -> URLSessionTask {
        var request = URLRequest(url: url)
        let body = Data("b".utf8)
        switch shape {
        case .httpBody: request.httpBody = body
        case .emptyHTTPBody: request.httpBody = Data()
        case .stream: request.httpBodyStream = InputStream(data: body)
        case .lowercaseGetWithBody:
            request.httpMethod = "get" // URLRequest writes it GET
            request.httpBody = body
        case .uploadedData: return session.uploadTask(with: request, from: body)
        case .uploadedEmptyData: return session.uploadTask(with: request, from: Data())
        case .uploadWithRequestStream:
            // A streamed upload goes by the delegate's stream (none here), not the request's.
            request.httpBodyStream = InputStream(data: body)
            return session.uploadTask(withStreamedRequest: request)
        }
        return session.dataTask(with: request)
    }

    static func describe(_ error: (any Error)?) -> String {
        guard let error else { return "ok" }
        let ns = error as NSError
        let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError
        return "\(ns.domain) \(ns.code) \(ns.localizedDescription) \(error is URLError ? "URLError" : "NSError") "
            + "\((error as? URLError)?.failingURL?.absoluteString ?? "-") \(ns.userInfo["NSErrorFailingURLStringKey"] as? String ?? "-") "
            + "under \(underlying.map { "\($0.code) \($0.localizedDescription) \($0.userInfo["NSErrorFailingURLStringKey"] as? String ?? "-")" } ?? "-")"
    }

    @Test("a URL whose scheme is not lower case (HTTP:) is refused as Foundation refuses it, even when its lower-case form is stored")
    func upperCaseScheme() async throws {
        let h = try Harness()
        h.origin.route("/u", response: .init(headers: [("Cache-Control", "max-age=60")], text: "u"))
        #expect(try await h.get("/u").text == "u")
        let upper = try #require(URL(string: "HTTP://127.0.0.1:\(h.origin.port)/u"))
        var codes: [Bool: Int] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            if case .failure(let error)? = await fetchOutcome(session, URLRequest(url: upper)) { codes[caching] = (error as NSError).code }
        }
        #expect(codes[false] == NSURLErrorUnsupportedURL && codes[true] == codes[false])
        #expect(h.origin.requestCount("/u") == 1)
    }
}

