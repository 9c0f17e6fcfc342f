import Foundation
import Testing
import HTTPCaching
import HTTPCachingTestKit

@Suite("The store conformance kit")
struct StoreConformanceTests {
    /// A store the kit can check only in part: no entry size limit under 64 MiB, no count
    /// limit it is told how to make, no way to damage it, claims per process.
    static func partial() -> StoreConformance {
        StoreConformance(makeStore: { try MemoryResponseStore(byteLimit: 1 << 30) })
    }

    @Test("each check it cannot run is reported as skipped, with its reason, and never counted as passed")
    func skippedChecksReported() throws {
        let report = try Self.partial().run()
        #expect(report.skippedChecks == ["refuses an entry over its size limit", "evicts past its count limit",
                                         "treats damage as a miss", "claims refreshes exclusively"])
        #expect(report.skipped.map(\.reason) == [
            "maxEntrySize is 134217728 bytes: no entry over it is small enough to write (the check needs a limit under 64 MiB)",
            "no makeStoreWithCountLimit was given", "no corrupt closure was given",
            "claimsAreExclusive is false: only that a first claim is granted was checked",
        ])
        #expect(report.passed == StoreConformance.checkNames.filter { !report.skippedChecks.contains($0) })
        #expect(report.description.hasPrefix("12 of 16 store conformance checks passed; skipped: 4"))
        #expect(report.description.contains("skipped evicts past its count limit: no makeStoreWithCountLimit was given"))
    }

    @Test("with skipsAreFailures, each skipped check fails the run, named with its reason")
    func skipsAreFailures() throws {
        let skipped = try Self.partial().run().skipped
        var strict = Self.partial()
        strict.skipsAreFailures = true
        let failure = try #require(throws: StoreConformance.Failure.self) { try strict.run() }
        #expect(failure.failures == skipped.map { "\($0.check): skipped: \($0.reason)" })
        #expect(failure.failures.count == 4)
    }
}
