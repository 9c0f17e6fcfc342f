import Foundation
import Synchronization
import Testing
import LoopbackOrigin

/// Runs the built demo as a user would, and checks what it prints and how it exits.
@Suite("The demo, run as a program")
struct DemoProcessTests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    /// Runs `cache-demo` with arguments, without blocking the test's thread.
    static func run(_ arguments: [String]) async throws -> Run {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let process = try ChildProcess(builtExecutable(named: "cache-demo").path, arguments,
                                                   output: .pipe, errors: .pipe)
                    // Standard error read beside standard output, so neither pipe fills and stalls the demo.
                    let errors = Mutex(Data())
                    let read = DispatchSemaphore(value: 0)
                    DispatchQueue.global().async {
                        let data = process.errors!.readDataToEndOfFile()
                        errors.withLock { $0 = data }
                        read.signal()
                    }
                    let out = process.output!.readDataToEndOfFile()
                    read.wait()
                    _ = process.waitForExit(timeout: .infinity)
                    continuation.resume(returning: Run(status: process.exitStatus ?? -1,
                                                       output: String(decoding: out, as: UTF8.self),
                                                       errors: String(decoding: errors.withLock { $0 }, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    @Test("--help prints the usage and exits 0")
    func help() async throws {
        let run = try await Self.run(["--help"])
        #expect(run.status == 0 && run.output.contains("usage: cache-demo"))
    }

    @Test("a bad flag or a bad URL prints a clear message and exits 2",
          arguments: [["fetch", "http://127.0.0.1/", "--bogus"], ["fetch", "ftp://x/y"], ["fetch"], ["walk"]])
    func usageErrors(arguments: [String]) async throws {
        let run = try await Self.run(arguments)
        #expect(run.status == 2)
        #expect(run.errors.contains("cache-demo: ") && run.errors.contains("--help"))
    }

    @Test("an unreachable URL prints the error and exits 1")
    func unreachable() async throws {
        let origin = try LoopbackOrigin()
        let url = origin.url("/nothing-listens-here")
        origin.stop() // the port is now closed
        let run = try await Self.run(["fetch", url.absoluteString])
        #expect(run.status == 1)
        #expect(run.errors.contains("request 1 to \(url.absoluteString) failed"))
    }

    @Test("fetch --json prints one object per request and per event, and waits for the background refresh")
    func json() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.routeVersioned("/j")
        let run = try await Self.run(["fetch", origin.url("/j").absoluteString, "--fresh", "0", "--usable", "60",
                                      "--repeat", "2", "--json"])
        #expect(run.status == 0)
        let objects = run.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(objects.count == run.output.split(separator: "\n").count, "every line is a JSON object")
        let requests = objects.filter { $0["n"] != nil }
        #expect(requests.map { $0["cache"] as? String } == ["miss", "stale"])
        #expect(requests.allSatisfy { $0["status"] as? Int == 200 && $0["bytes"] as? Int == 2 && $0["ms"] is Double })
        #expect(objects.contains { $0["event"] as? String == "refreshed" && $0["changed"] as? Bool == true },
                "the refresh finished before the demo exited")
        #expect(origin.requestCount("/j") == 2)
    }

    @Test("the walkthrough shows every transition, ends with a summary and statistics that match its rows, and --svg draws each request")
    func walkthrough() async throws {
        let svgFile = FileManager.default.temporaryDirectory.appendingPathComponent("cache-demo-\(UUID().uuidString).svg")
        defer { try? FileManager.default.removeItem(at: svgFile) }
        let run = try await Self.run(["--svg", svgFile.path])
        #expect(run.status == 0)
        for status in ["miss", "fresh", "stale", "expired", "revalidated", "fallback"] {
            #expect(run.output.contains("  \(status) "), "\(status)")
        }
        #expect(run.output.contains("refreshed in the background (body changed)"))
        let output = WalkthroughOutput(run.output)
        output.expectConsistent()
        #expect(output.served == ["miss", "fresh", "stale", "fresh", "expired", "fresh", "miss", "revalidated", "fallback"])
        #expect(output.summary[1].contains("(1 background refresh, 1 revalidation answered 304)"))

        let document = try SVGDocument(String(decoding: try Data(contentsOf: svgFile), as: UTF8.self))
        let marks = document.groups.filter { $0.classes.first == "request" }
        #expect(marks.map { $0.classes.last ?? "" } == output.served, "one mark per request, in order, as it was served")
        #expect(zip(marks, output.served.indices).allSatisfy { $0.texts.first == "#\($1 + 1) \(output.served[$1])" })
        #expect(document.count("polygon", class: "origin-request") == output.originHits.last, "a mark for each request the origin received")
        #expect(document.count("polygon", class: "refresh") == 1 && document.texts.contains("origin stopped"))
    }
}
