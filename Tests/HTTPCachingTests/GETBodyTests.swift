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
        case httpBody, emptyHTTPBody, stream, uploadedData, lowercaseGet
    }

    @Test("fails as without the cache, with Foundation's error and nothing sent; an empty body is no body", arguments: Shape.allCases)
    func sameOutcome(_ shape: Shape) async throws {
        let h = try Harness()
        h.origin.route("/g", response: .init(headers: [("Cache-Control", "max-age=600")], text: "g"))
        _ = try await h.get("/g") // a fresh entry for the URL
        var seen: [Bool: String] = [:]
        var sent: [Bool: Int] = [:]
        for caching in [false, true] {
            let session = h.session(caching: caching)
            defer { session.finishTasksAndInvalidate() }
            let before = h.origin.requestCount("/g")
            seen[caching] = Self.describe(await Self.send(shape, to: h.origin.url("/g"), on: session))
            sent[caching] = h.origin.requestCount("/g") - before
        }
        #expect(seen[true] == seen[false], "with the cache, then without: \(seen)")
        let refused = [.httpBody, .stream, .uploadedData].contains(shape)
        #expect(seen[false]?.hasPrefix("\(NSURLErrorDomain) \(NSURLErrorDataLengthExceedsMaximum)") == refused, "\(seen)")
        if refused { #expect(sent == [false: 0, true: 0], "nothing reaches the origin: \(sent)") }
    }

    /// Sends the shape's request; the error it ends with, if any.
    static func send(_ shape: Shape, to url: URL, on session: URLSession) async -> (any Error)? {
        var request = URLRequest(url: url)
        let body = Data("b".utf8)
        return await withCheckedContinuation { continuation in
            let handler: @Sendable (Data?, URLResponse?, (any Error)?) -> Void = { _, _, error in continuation.resume(returning: error) }
            switch shape {
            case .httpBody: request.httpBody = body
            case .emptyHTTPBody: request.httpBody = Data()
            case .stream: request.httpBodyStream = InputStream(data: body)
            case .lowercaseGet: request.httpMethod = "get"
            case .uploadedData: return session.uploadTask(with: request, from: body, completionHandler: handler).resume()
            }
            session.dataTask(with: request, completionHandler: handler).resume()
        }
    }

    static func describe(_ error: (any Error)?) -> String {
        guard let error = error as NSError? else { return "ok" }
        return "\(error.domain) \(error.code) \(error.localizedDescription) "
            + "\(error.userInfo["NSErrorFailingURLStringKey"] as? String ?? "-")"
    }
}
