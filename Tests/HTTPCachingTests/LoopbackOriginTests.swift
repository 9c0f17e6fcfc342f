import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import LoopbackOrigin

@Suite("Loopback origin")
struct LoopbackOriginTests {
    /// Sends raw bytes on a new connection and returns everything the server answers (until
    /// it closes, or until the answer ends with `until`).
    func raw(_ bytes: String, port: Int, until end: String? = nil, timeout seconds: Int = 5) -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { return "connect failed" }
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = Array(bytes.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if end == nil { shutdown(fd, Int32(SHUT_WR)) }
        var answer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !(end.map { String(decoding: answer, as: UTF8.self).hasSuffix($0) } ?? false) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    @Test("answers routed paths, 404 for others, and counts per path")
    func routesAndCounts() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/v", headers: [("X-Test", "1")])
        let session = URLSession(configuration: .ephemeral)
        let first = try await fetchPlain(session, origin.url("/v?x=1"))
        let second = try await fetchPlain(session, origin.url("/v?x=2"))
        let missing = try await fetchPlain(session, origin.url("/nope"))
        #expect(first.0 == "v1" && second.0 == "v2")
        #expect(first.1.value(forHTTPHeaderField: "X-Test") == "1")
        #expect(missing.1.statusCode == 404)
        #expect(origin.requestCount("/v") == 2)
        #expect(origin.requestCount() == 3)
    }

    @Test("malformed requests get a 400, and the origin keeps serving", arguments: [
        "GARBAGE\r\n\r\n",
        "GET /x HTTP/9.9\r\n\r\n",
        "GET relative HTTP/1.1\r\n\r\n",
        "GET /x HTTP/1.1\r\nno-colon-here\r\n\r\n",
        "G(T /x HTTP/1.1\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "\u{FF}\u{FE}\r\n\r\n",
    ])
    func malformed(request: String) throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/x", response: .init(text: "ok"))
        #expect(raw(request, port: origin.port).hasPrefix("HTTP/1.1 400 "))
        #expect(raw("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", port: origin.port).hasSuffix("\r\n\r\nok"))
    }

    @Test("a request head that never ends is cut off with a 400, not buffered forever")
    func oversizedHead() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let huge = "GET /x HTTP/1.1\r\nX: " + String(repeating: "a", count: 100_000)
        #expect(raw(huge, port: origin.port).hasPrefix("HTTP/1.1 400 "))
    }

    @Test("reads chunked request bodies (extensions and trailers ignored), then the next request on the connection")
    func chunkedRequestBody() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/echo") { request, _ in .init(text: request.method + ":" + String(decoding: request.body, as: UTF8.self)) }
        let chunked = "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n"
        let answer = raw(chunked + "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer.contains("POST:hello, chunked!"))
        #expect(answer.contains("GET:"))
        #expect(origin.requestCount("/echo") == 2)
    }

    @Test("keeps a connection alive across requests and reads request bodies")
    func keepAliveAndBody() throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/echo") { request, _ in .init(text: request.method + ":" + String(decoding: request.body, as: UTF8.self)) }
        let answer = raw("POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /echo HTTP/1.1\r\nConnection: close\r\n\r\n", port: origin.port)
        #expect(answer.contains("POST:hello"))
        #expect(answer.contains("GET:"))
        #expect(origin.requestCount("/echo") == 2)
    }

    @Test("origins stopping while others serve never cut another origin's exchange (descriptor numbers are reused at once)")
    func stopsNeverTouchOthers() {
        let failures = Mutex([String]())
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<150 {
                do {
                    let origin = try LoopbackOrigin()
                    origin.route("/x", response: .init(text: "ok"))
                    // Keep-alive: the origin's thread sees the close below while stop() runs.
                    let answer = raw("GET /x HTTP/1.1\r\nHost: a\r\n\r\n", port: origin.port, until: "\r\n\r\nok", timeout: 2)
                    origin.stop()
                    if !answer.hasSuffix("\r\n\r\nok") {
                        failures.withLock { $0.append("worker \(worker) round \(round): \(answer.debugDescription)") }
                        break // one is enough: a worker whose origins stopped answering ends here
                    }
                } catch {
                    failures.withLock { $0.append("worker \(worker) round \(round): \(error)") }
                    break
                }
            }
        }
        let found = failures.withLock { $0 }
        #expect(found.isEmpty, "\(found.count) exchanges cut: \(found.prefix(3))")
    }
}
