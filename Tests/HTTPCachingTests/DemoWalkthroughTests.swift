import Foundation
import Testing

/// The walkthrough's output, read back: its rows, its summary and its statistics table.
struct WalkthroughOutput {
    static let statuses = ["fresh", "stale", "revalidated", "fallback", "miss", "expired", "bypass"]

    /// How each request was served, in order.
    let served: [String]
    /// The origin's own count of requests after each row.
    let originHits: [Int]
    /// The summary's lines, from "in this run:" on.
    let summary: [String]
    /// The statistics table's lines.
    let table: [String]

    init(_ output: String) {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let rows = lines.map { $0.split(separator: " ").map(String.init) }
            .filter { $0.count >= 7 && Int($0[0]) != nil && Self.statuses.contains($0[2]) }
        served = rows.map { $0[2] }
        originHits = rows.compactMap { Int($0.last!) }
        let start = lines.firstIndex { $0.hasPrefix("in this run: ") } ?? lines.endIndex
        summary = Array(lines[start...].prefix { !$0.isEmpty })
        table = Array(lines.drop { !$0.hasPrefix("statistics (since ") }.prefix { !$0.isEmpty })
    }

    /// The count the summary's first line gives a status (`2 miss`), 0 when it names none.
    func summaryCount(_ status: String) -> Int {
        guard let line = summary.first, let match = line.firstMatch(of: try! Regex("([0-9]+) \(status)[,)]")) else { return 0 }
        return Int(match.output[1].substring!)!
    }

    /// The first number after `prefix` on a summary line.
    func summaryNumber(after prefix: String) -> Int? {
        for line in summary {
            guard let range = line.range(of: prefix) else { continue }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        return nil
    }

    /// Checks that the summary and the table say what the rows show: every status counted as
    /// often as it was served, the requests and the origin's count; the cache's origin
    /// requests as the table has them.
    func expectConsistent(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(summary.count == 3 && !table.isEmpty, "a summary and a table", sourceLocation: sourceLocation)
        #expect(summaryNumber(after: "in this run: ") == served.count, sourceLocation: sourceLocation)
        for status in Self.statuses {
            let rows = served.filter { $0 == status }.count
            #expect(summaryCount(status) == rows, "\(status) in the summary", sourceLocation: sourceLocation)
            #expect(DemoStatsTests.value(table, "  " + status) == rows, "\(status) in the table", sourceLocation: sourceLocation)
        }
        #expect(summaryNumber(after: "the origin received ") == originHits.last, "the origin's own count", sourceLocation: sourceLocation)
        #expect(summaryNumber(after: "the cache asked the origin ") == DemoStatsTests.value(table, "origin requests"),
                sourceLocation: sourceLocation)
        #expect(!summary.joined().contains("one of them with a 304"), "no fixed claims", sourceLocation: sourceLocation)
    }
}

@Suite("The demo's walkthrough, run as a program")
struct DemoWalkthroughTests {
    @Test("a second walkthrough over the same disk store says what it did: no misses, answered from the first run's entries")
    func secondRunOverDisk() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-demo-walk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try await DemoProcessTests.run(["--store", "disk:\(directory.path)"])
        let second = try await DemoProcessTests.run(["--store=disk:\(directory.path)"])
        #expect(first.status == 0 && second.status == 0)
        let one = WalkthroughOutput(first.output), two = WalkthroughOutput(second.output)
        one.expectConsistent()
        two.expectConsistent()
        #expect(one.served.count == 9 && two.served.count == 9)
        #expect(one.summaryCount("miss") == 2 && one.served.first == "miss", "the first run starts empty")
        #expect(two.summaryCount("miss") == 0 && !two.summary[0].contains("miss"), "the second finds every entry stored")
        #expect(two.served.first != "miss" && second.output.contains("the store already holds 2 entries from an earlier run"))
        #expect(two.summary[0] != one.summary[0], "the summary follows the run")
    }
}
