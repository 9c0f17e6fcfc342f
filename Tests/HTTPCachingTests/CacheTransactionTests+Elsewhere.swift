import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

extension CacheTransactionTests {
    @Test("an answer from a redirect the cache did not see (Foundation's own class sent the request): delivered unstored, whatever it says; the entry it was to replace goes; once received, nothing more changes")
    func answeredFromElsewhere() {
        let storable = Self.head(200, ["Cache-Control": "max-age=600"])
        var fresh = Self.transaction()
        #expect(Self.names(fresh.start(entry: nil, now: Self.t0)) == ["forward"])
        #expect(Self.names(fresh.answeredFromElsewhere(storable))
                == ["notStored(\(NotStoredReason.redirectedUnseen))", "served(bypass)", "respond(200, bypass)"])
        #expect(Self.names(fresh.body(Data("there".utf8))).isEmpty)
        #expect(Self.names(fresh.end(now: Self.t0)) == ["deliver(there)", "finish"], "nothing stored")
        #expect(Self.names(fresh.answeredFromElsewhere(storable)).isEmpty)

        var replacing = Self.transaction()
        _ = replacing.start(entry: Self.entry(headers: [:], age: 100_000), now: Self.t0)
        #expect(Self.names(replacing.answeredFromElsewhere(storable))
                == ["remove", "notStored(\(NotStoredReason.redirectedUnseen))", "served(bypass)", "respond(200, bypass)"])

        var received = Self.transaction()
        _ = received.start(entry: nil, now: Self.t0)
        _ = received.head(storable, now: Self.t0)
        #expect(Self.names(received.answeredFromElsewhere(storable)).isEmpty, "only an answer awaited")
    }
}
