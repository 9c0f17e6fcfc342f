import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching
import LoopbackOrigin

/// Installing caching on many configurations and dropping them does not grow memory; a
/// dropped installation's protocol class is reused, never to serve a session that does not
/// carry the new installation.
@Suite("Lifetime of installations")
struct LifetimeTests {
    @Test("10,000 install-and-discard cycles (some with requests) in a fresh process: resident memory flat, under 20 MB in all",
          .timeLimit(.minutes(1)),
          .disabled(if: underSanitizer, "a sanitizer's allocator keeps freed memory: resident memory is bounded in the plain run"))
    func installAndDiscard() throws {
        let values = probeValues(try runTransparencyProbe(["lifetime", "10000", "50"]))
        let before = try #require(values["rss-before"]), mid = try #require(values["rss-mid"]), after = try #require(values["rss-after"])
        #expect(after - before < 20 << 10, "\(values)")
        // Each installation used to leave a protocol class behind (about 1 KB of metadata
        // that is never freed): 8,000 cycles grew 7.6 MB.
        #expect(after - mid < 3 << 10, "the last 8,000 cycles grew by \(after - mid) KB")
    }

    @Test("a thousand installations dropped one after another reuse their protocol classes")
    func classesReused() async throws {
        let before = BindingRegistry.classCount
        for _ in 0..<1_000 {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.enableHTTPCaching(HTTPCache())
        }
        // Other tests running at the same time make a few classes of their own.
        #expect(BindingRegistry.classCount - before < 100)
    }

    @Test("the binding and its forwarding session are released once the configuration and its sessions are gone")
    func bindingReleased() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/once", response: .init(headers: [("Cache-Control", "no-store")], text: "once"))
        weak var weakBinding: ProtocolBinding?
        do {
            let configuration = URLSessionConfiguration.ephemeral
            let installation = configuration.enableHTTPCaching(HTTPCache())
            weakBinding = installation.binding
            let session = URLSession(configuration: configuration)
            #expect(try await fetch(session, origin.url("/once")).text == "once")
            session.finishTasksAndInvalidate()
        }
        // Invalidation ends on Foundation's queues, and nothing reports when the last
        // reference goes: look again until it has, for at most five seconds.
        #expect(await eventually(timeout: 5) { weakBinding == nil }, "nothing keeps the binding (and its forwarding session) alive")
    }

    @Test("a configuration whose urlCache was replaced after installing gets installationReleased, never another installation's cache")
    func replacedCarrier() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/x", response: .init(headers: [("Cache-Control", "max-age=600")], text: "x"))
        let tampered = URLSessionConfiguration.ephemeral
        tampered.enableHTTPCaching(HTTPCache())
        tampered.urlCache = nil // the installation is released with its carrier, its class freed
        let other = HTTPCache()
        let reuser = URLSessionConfiguration.ephemeral
        reuser.enableHTTPCaching(other) // may be given the freed class
        let session = URLSession(configuration: tampered)
        defer { session.finishTasksAndInvalidate() }
        let outcome = try #require(await fetchOutcome(session, URLRequest(url: origin.url("/x"))))
        #expect((outcome.failure as? HTTPCachingError)?.code == .installationReleased)
        #expect(other.entryCount == 0 && origin.requestCount() == 0)
        _ = reuser
    }
}
