import Foundation
import HTTPCachingTestKit

/// A seed named by an environment variable, in decimal or in hex with `0x` (underscores
/// allowed); nil when the variable is unset or not a number.
func environmentSeed(_ name: String) -> UInt64? {
    guard let text = ProcessInfo.processInfo.environment[name]?.trimmingCharacters(in: .whitespaces) else { return nil }
    let digits = text.replacingOccurrences(of: "_", with: "")
    if digits.lowercased().hasPrefix("0x") { return UInt64(digits.dropFirst(2), radix: 16) }
    return UInt64(digits)
}

/// A seed as failure messages print it, and as `environmentSeed` reads it back.
func hexSeed(_ seed: UInt64) -> String { "0x" + String(seed, radix: 16) }

/// The cases of one fuzz run: always `minimum` of them, then more, up to `maximum`, while the
/// run is within its time budget (so a slow machine, or a sanitizer, runs the minimum and no
/// fewer). Case `n` draws from a generator of its own, seeded from the run's seed and `n`, so
/// it is the same case on every machine, however many ran before it.
///
/// A failure names the seed and the case. To replay it, set `HTTP_CACHING_FUZZ_SEED` to the
/// seed (each fuzz test then runs that seed alone, instead of its fixed and fresh ones) and
/// `HTTP_CACHING_FUZZ_CASE` to the case (every run then goes at least as far as that case,
/// whatever its budget).
struct FuzzCases {
    static let seedVariable = "HTTP_CACHING_FUZZ_SEED"
    static let caseVariable = "HTTP_CACHING_FUZZ_CASE"

    /// One case: its number, the seed of its own generator, and how a failure names it.
    struct Case {
        let index: Int
        let seed: UInt64
        let label: String
    }

    /// The seeds a fuzz test runs with: `fixed` ones (the same every run) and `fresh` random
    /// ones (new every run, printed in the test's name), or only `HTTP_CACHING_FUZZ_SEED`
    /// when it is set.
    static func seeds(_ fixed: [UInt64], fresh: Int = 1) -> [UInt64] {
        if let seed = environmentSeed(seedVariable) { return [seed] }
        return fixed + (0..<fresh).map { _ in UInt64.random(in: .min ... .max) }
    }

    let seed: UInt64
    let minimum: Int
    let maximum: Int
    let budget: Duration

    /// A run of `minimum` cases, and more up to `maximum` (the default: `minimum`) while the
    /// run has taken less than `budget` (the default: none).
    init(seed: UInt64, minimum: Int, maximum: Int? = nil, budget: Duration = .zero) {
        let replayed = environmentSeed(Self.caseVariable).map { Int(clamping: $0) + 1 } ?? 0
        self.seed = seed
        self.minimum = max(minimum, replayed)
        self.maximum = max(maximum ?? minimum, self.minimum)
        self.budget = budget
    }

    /// Case `index`: its generator's seed is the run's seed and the index, mixed.
    func makeCase(_ index: Int) -> Case {
        var mixer = SeededGenerator(seed: seed ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
        let label = "seed \(hexSeed(seed)) case \(index) (replay: \(Self.seedVariable)=\(hexSeed(seed)) \(Self.caseVariable)=\(index))"
        return Case(index: index, seed: mixer.next(), label: label)
    }

    /// Runs `body` on each case in order.
    /// - Returns: how many cases ran.
    /// - Throws: what `body` throws, which ends the run.
    @discardableResult
    func run(_ body: (Case) throws -> Void) rethrows -> Int {
        let clock = ContinuousClock()
        let start = clock.now
        var index = 0
        while index < maximum && (index < minimum || clock.now - start < budget) {
            try body(makeCase(index))
            index += 1
        }
        return index
    }
}
