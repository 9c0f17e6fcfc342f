import Foundation
import HTTPCaching

/// The behaviour every `ResponseStore` must show, checked through its public API only.
///
/// Run it from any test framework; it throws one `StoreConformance.Failure` listing every
/// check that failed, and returns a `Report` naming every check it could not run, and why:
///
/// ```swift
/// @Test func conformance() throws {
///     let report = try StoreConformance(makeStore: { try MyStore(namespace: UUID().uuidString) }).run()
///     #expect(report.skipped.isEmpty, "\(report)")
/// }
/// ```
///
/// Each check gets a new, empty store from `makeStore`. The optional closures turn on the
/// checks that need something only the store's author can provide; without them, and for a
/// store with no entry size limit below 64 MiB, those checks are skipped and reported, never
/// passed. Set `skipsAreFailures` to make a skipped check fail the run instead.
public struct StoreConformance {
    /// Makes a new, empty store.
    public var makeStore: () throws -> any ResponseStore
    /// Makes a new, empty store holding at most `count` entries, to check eviction; nil skips
    /// the eviction checks. The default is nil.
    public var makeStoreWithCountLimit: ((_ count: Int) throws -> any ResponseStore)?
    /// Damages the stored data of a key behind the store's back (flip bytes in its file,
    /// overwrite its value), to check that damage is a miss and is removed; nil skips the
    /// corruption check. The default is nil.
    public var corrupt: ((_ store: any ResponseStore, _ key: CacheKey) throws -> Void)?
    /// Whether `claimRefresh(of:lease:)` is exclusive across holders (a shared store), so a
    /// second claim fails until the first is released. The default is false.
    public var claimsAreExclusive: Bool
    /// How many threads the concurrency check runs. The default is 8.
    public var threads: Int
    /// Whether a check that cannot run fails the run (listed in `Failure` as skipped) instead
    /// of only being reported in the `Report`. The default is false.
    public var skipsAreFailures: Bool

    /// A conformance run with the given parts; every argument but `makeStore` has the default above.
    public init(makeStore: @escaping () throws -> any ResponseStore,
                makeStoreWithCountLimit: ((_ count: Int) throws -> any ResponseStore)? = nil,
                corrupt: ((_ store: any ResponseStore, _ key: CacheKey) throws -> Void)? = nil,
                claimsAreExclusive: Bool = false, threads: Int = 8, skipsAreFailures: Bool = false) {
        self.makeStore = makeStore
        self.makeStoreWithCountLimit = makeStoreWithCountLimit
        self.corrupt = corrupt
        self.claimsAreExclusive = claimsAreExclusive
        self.threads = threads
        self.skipsAreFailures = skipsAreFailures
    }

    /// Every check that failed, with what was expected.
    public struct Failure: Error, CustomStringConvertible {
        /// One line per failed expectation: the check's name, then what went wrong.
        public let failures: [String]

        /// The failures, one per line.
        public var description: String {
            "\(failures.count) store conformance failure(s):\n" + failures.joined(separator: "\n")
        }
    }

    /// A check `run()` could not perform, or could perform only in part, and why.
    public struct Skipped: Sendable, Equatable, CustomStringConvertible {
        /// The check's name, one of `checkNames`.
        public let check: String
        /// Why it could not run, and what would let it.
        public let reason: String

        /// The check's name, then the reason.
        public var description: String { "\(check): \(reason)" }
    }

    /// What a run that found no failure checked: the checks that ran whole, and those it could
    /// not run, each with the reason.
    public struct Report: Sendable, CustomStringConvertible {
        /// The names of the checks that ran whole and passed, in the order of `checkNames`.
        public let passed: [String]
        /// The checks that did not run, or ran only in part, in the order of `checkNames`.
        public let skipped: [Skipped]

        /// The names of the skipped checks.
        public var skippedChecks: [String] { skipped.map(\.check) }

        /// How many checks passed, then one line per skipped check.
        public var description: String {
            (["\(passed.count) of \(passed.count + skipped.count) store conformance checks passed; skipped: \(skipped.count)"]
                + skipped.map { "skipped \($0)" }).joined(separator: "\n")
        }
    }

    /// The names of the checks `run()` performs, in order.
    public static let checkNames = ["reads back every field", "replaces an entry", "keys differ in every part",
                                    "removes one", "removes all, with progress", "removes by metadata, with progress",
                                    "lists metadata", "counts bytes and entries", "refuses an entry over its size limit",
                                    "answers immediately only with what it has", "keeps one partition secret",
                                    "is safe from many threads", "evicts past its count limit", "treats damage as a miss",
                                    "claims refreshes exclusively", "writes a body in parts, commits and aborts"]

    /// Runs every check it can.
    /// - Returns: the checks that passed, and those skipped, each with the reason (a check
    ///   needs its closure, and the size check a `maxEntrySize` under 64 MiB).
    /// - Throws: `Failure` listing every expectation that did not hold, and every error a
    ///   store threw where none was expected (each ends its check), and, when
    ///   `skipsAreFailures`, every skipped check.
    @discardableResult
    public func run() throws -> Report {
        var context = Context()
        let checks: [(String, (inout Context) throws -> Void)] = [
            (Self.checkNames[0], readsBackEveryField), (Self.checkNames[1], replacesAnEntry),
            (Self.checkNames[2], keysDifferInEveryPart), (Self.checkNames[3], removesOne),
            (Self.checkNames[4], removesAll), (Self.checkNames[5], removesByMetadata),
            (Self.checkNames[6], listsMetadata), (Self.checkNames[7], countsBytesAndEntries),
            (Self.checkNames[8], refusesOversizedEntries), (Self.checkNames[9], answersImmediately),
            (Self.checkNames[10], keepsOneSecret), (Self.checkNames[11], isSafeFromManyThreads),
            (Self.checkNames[12], evicts), (Self.checkNames[13], treatsDamageAsMiss),
            (Self.checkNames[14], claimsExclusively), (Self.checkNames[15], writesInParts),
        ]
        var passed: [String] = []
        for (name, check) in checks {
            context.check = name
            let before = (failures: context.failures.count, skipped: context.skipped.count)
            do {
                try check(&context)
            } catch {
                context.fail("threw \(error)")
            }
            if context.failures.count == before.failures && context.skipped.count == before.skipped { passed.append(name) }
        }
        if skipsAreFailures { context.failures += context.skipped.map { "\($0.check): skipped: \($0.reason)" } }
        if !context.failures.isEmpty { throw Failure(failures: context.failures) }
        return Report(passed: passed, skipped: context.skipped)
    }

    // MARK: - Entries

    /// A time well in the past, so stores that compare with the real clock keep these entries.
    public static let base = Date(timeIntervalSince1970: 1_700_000_000)

    /// An entry for a path on `http://example.test`, with the given parts.
    public static func entry(_ path: String, body: String = "body", storedAt: Date = base,
                             headers: [String: String] = ["Content-Type": "text/plain"],
                             windows: CacheWindows? = nil, usefulUntil: Date? = nil,
                             statusCode: Int = 200) -> CacheEntry {
        let url = URL(string: "http://example.test\(path)")!
        return CacheEntry(key: CacheKey(url: url), url: url, statusCode: statusCode, headers: headers,
                          body: Data(body.utf8), storedAt: storedAt, windows: windows, usefulUntil: usefulUntil)
    }

    struct Context {
        var check = ""
        var failures: [String] = []
        var skipped: [Skipped] = []

        /// Records that the current check cannot run (or runs only in part), and why.
        mutating func skip(_ reason: String) {
            skipped.append(Skipped(check: check, reason: reason))
        }

        mutating func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { fail(message()) }
        }

        mutating func fail(_ message: String) {
            failures.append("\(check): \(message)")
        }
    }
}
