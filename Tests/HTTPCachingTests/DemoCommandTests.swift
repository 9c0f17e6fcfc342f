import Foundation
import Testing
@testable import HTTPCaching
@testable import cache_demo

@Suite("Demo command line")
struct DemoCommandTests {
    @Test("no arguments is the walkthrough; --help is help")
    func basics() throws {
        #expect(try DemoCommand.parse([]) == .walkthrough(.memory))
        #expect(try DemoCommand.parse(["--store", "disk:/tmp/x"]) == .walkthrough(.disk(path: "/tmp/x")))
        #expect(try DemoCommand.parse(["--store=disk"]) == .walkthrough(.disk(path: nil)))
        #expect(try DemoCommand.parse(["--help"]) == .help)
        #expect(try DemoCommand.parse(["fetch", "http://a.test/", "--help"]) == .help)
    }

    @Test("fetch takes fractional windows, a repeat count, an interval and --json, in either flag form")
    func fetchOptions() throws {
        let command = try DemoCommand.parse(["fetch", "http://a.test/x?q=1", "--fresh", "0.5", "--usable=2.5",
                                             "--repeat", "3", "--interval=0.25", "--json", "--store", "disk:/tmp/c", "--policy", "http"])
        var expected = FetchOptions(url: URL(string: "http://a.test/x?q=1")!)
        expected.store = .disk(path: "/tmp/c")
        expected.policy = .httpSemantics
        expected.windows = try CacheWindows(fresh: 0.5, usable: 2.5)
        expected.repeatCount = 3
        expected.interval = 0.25
        expected.json = true
        #expect(command == .fetch(expected))
    }

    @Test("a fresh window longer than the default usable one raises the usable window to match")
    func freshOnly() throws {
        guard case .fetch(let options) = try DemoCommand.parse(["fetch", "https://a.test", "--fresh", "300000"]) else {
            Issue.record("not a fetch"); return
        }
        #expect(options.windows.fresh == 300_000 && options.windows.usable == 300_000)
    }

    @Test("bad command lines are usage errors with a clear message", arguments: [
        (["nonsense"], "unknown command"),
        (["fetch"], "needs a URL"),
        (["fetch", "ftp://a.test/x"], "not an http or https URL"),
        (["fetch", "not a url"], "not an http or https URL"),
        (["fetch", "http://"], "not an http or https URL"),
        (["fetch", "http://a.test", "--bogus"], "unknown option"),
        (["fetch", "http://a.test", "--fresh"], "needs a value"),
        (["fetch", "http://a.test", "--fresh", "-1"], "at least 0"),
        (["fetch", "http://a.test", "--fresh", "abc"], "number of seconds"),
        (["fetch", "http://a.test", "--repeat", "0"], "whole number"),
        (["fetch", "http://a.test", "--fresh", "10", "--usable", "5"], "0 <= fresh <= usable"),
        (["fetch", "http://a.test", "http://b.test"], "unexpected argument"),
        (["fetch", "http://a.test", "--store", "cloud"], "--store takes"),
        (["--store", "disk:"], "--store takes"),
        (["fetch", "http://a.test", "--policy", "sometimes"], "--policy takes one of"),
        (["--store"], "needs a value"),
        (["--store", "memory", "extra"], "unexpected argument"),
    ])
    func usageErrors(arguments: [String], message: String) {
        expectUsageError(arguments, message)
    }

    @Test("JSON lines keep field order and escape strings")
    func jsonLines() {
        let line = JSONLine([("n", .int(1)), ("cache", .string("miss")), ("status", .int(200)), ("bytes", .int(123)), ("ms", .number(4.23))])
        #expect(line.text == #"{"n":1,"cache":"miss","status":200,"bytes":123,"ms":4.2}"#)
        #expect(JSONLine.quote("a\"b\\c\nd\u{1}") == #""a\"b\\c\nd\u0001""#)
    }

    @Test("events become JSON lines; per-request kinds are left to the request lines")
    func eventLines() {
        let key = CacheKey(url: URL(string: "http://a.test/")!)
        let refreshed = CacheEvent(kind: .refreshed(bodyChanged: true), key: key, url: URL(string: "http://a.test/"), date: Date())
        #expect(refreshed.jsonLine?.text == #"{"event":"refreshed","changed":true,"key":"GET http://a.test/","url":"http://a.test/"}"#)
        #expect(CacheEvent(kind: .served(.fresh), key: key, url: nil, date: Date()).jsonLine == nil)
    }
}

/// Expects `arguments` to be refused by the demo's parser with an error that says `message`.
func expectUsageError(_ arguments: [String], _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try DemoCommand.parse(arguments)
        Issue.record("parsed \(arguments)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.description.contains(message), "\(error.description)", sourceLocation: sourceLocation)
    }
}
