import Foundation
import HTTPCaching

/// What the command line asked for. Parsing is pure so the tests can check every case.
enum DemoCommand: Equatable {
    /// The guided walkthrough against the embedded origin.
    case walkthrough(StoreChoice)
    /// Fetch a URL through the cache, repeatedly.
    case fetch(FetchOptions)
    /// Explain what the cache would do with a request for a URL, and why.
    case explain(ExplainOptions)
    /// Print the usage.
    case help
}

/// Where the demo's cache keeps its entries.
enum StoreChoice: Equatable {
    /// In memory: gone when the demo exits.
    case memory
    /// On disk (a memory tier in front), in the given directory or the default one.
    case disk(path: String?)
    /// In Redis, at `redis://[user:password@]host:port[/db]`, under the prefix `cache-demo:`.
    case redis(url: String)

    init(parsing text: String) throws(UsageError) {
        if text == "memory" { self = .memory; return }
        if text == "disk" { self = .disk(path: nil); return }
        if text.hasPrefix("disk:"), text.count > 5 { self = .disk(path: String(text.dropFirst(5))); return }
        if text.lowercased().hasPrefix("redis") {
            do {
                _ = try RedisConfiguration(url: text)
            } catch {
                throw UsageError(description: "--store takes redis://[user:password@]host:port[/db]: \(error)")
            }
            self = .redis(url: text)
            return
        }
        throw UsageError(description: "--store takes memory, disk, disk:PATH or redis://[user:password@]host:port[/db], not '\(text)'")
    }

    func makeStore() throws -> any ResponseStore {
        switch self {
        case .memory:
            return MemoryResponseStore()
        case .disk(let path):
            let directory = path.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? DiskResponseStore.defaultDirectory
            return TieredResponseStore(back: try DiskResponseStore(directory: directory))
        case .redis(let url):
            return try RedisResponseStore(url: url, keyPrefix: "cache-demo:")
        }
    }
}

struct FetchOptions: Equatable {
    var url: URL
    var store = StoreChoice.memory
    var policy = CachingPolicy.twoTier
    var windows = CacheWindows.standard
    var repeatCount = 1
    var interval: TimeInterval = 0
    var json = false
}

/// `cache-demo explain URL ...`: what the cache would do with a GET for the URL, from the
/// store, without the network (unless `--fetch-first`).
struct ExplainOptions: Equatable {
    /// A request header field, `--header 'Name: value'`.
    struct Header: Equatable {
        var name: String
        var value: String
    }

    var url: URL
    var store = StoreChoice.memory
    var policy = CachingPolicy.twoTier
    var windows = CacheWindows.standard
    var headers: [Header] = []
    var fetchFirst = false
    var json = false
}

/// A command line that cannot be run; the demo prints it and exits with status 2.
struct UsageError: Error, Equatable, CustomStringConvertible {
    let description: String
}

extension DemoCommand {
    /// The names `--policy` takes.
    static let policyNames = ["two-tier", "network-only", "cache-first", "cache-only", "http"]

    static let usage = """
    usage: cache-demo [--store STORE]      walk through miss, fresh, stale, refresh and expiry
                                           against an embedded local origin
           cache-demo fetch URL [options]  fetch URL through the cache
           cache-demo explain URL [options]
                                           what the cache would do with a GET for URL, and why:
                                           the key, the stored entry, its age and lifetime, the
                                           policy and windows, whether it would be stored, the
                                           Cache-Status it would carry; no network
           cache-demo --help

    --store STORE         memory (the default), disk (under ~/.cache/swift-http-caching),
                          disk:PATH, or redis://[user:password@]host:port[/db] (keys under
                          cache-demo:, shared by every process using that server); a second
                          run with a disk or Redis store is answered from the first run's entries

    fetch options:
      --fresh SECONDS     fresh window: served with no network (default 60; may be fractional)
      --usable SECONDS    usable window: served, then refreshed in the background
                          (default 172800, two days)
      --repeat N          how many requests to make (default 1)
      --interval SECONDS  pause between requests (default 0)
      --policy NAME       two-tier (default), http, cache-first, cache-only or network-only
      --store STORE       as above
      --json              one JSON object per request and per event, instead of a table

    explain options (and --fresh, --usable and --policy as above):
      --store STORE       the store to read; explain fetches nothing, so with the default
                          memory store nothing is stored unless --fetch-first is given:
                          `cache-demo fetch URL --store disk` then
                          `cache-demo explain URL --store disk` explains the stored entry
      --fetch-first       fetch URL once through the cache first, then explain
      --header 'N: V'     a request header field (repeatable), e.g. for Vary or credentials;
                          -H works too
      --json              the explanation as one JSON object

    how each request was served: miss, fresh, stale, expired, revalidated, fallback, bypass
    exit status: 0 success, 1 a request failed, 2 a bad command line
    """

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) throws(UsageError) -> DemoCommand {
        guard let first = arguments.first else { return .walkthrough(.memory) }
        if first == "--help" || first == "-h" || first == "help" { return .help }
        if first.hasPrefix("--store") { return .walkthrough(try parseStoreOnly(arguments)) }
        guard first == "fetch" || first == "explain" else { throw UsageError(description: "unknown command '\(first)'") }
        let explaining = first == "explain"

        var parsed = ParsedArguments()
        let valued = explaining ? ["--fresh", "--usable", "--store", "--policy", "--header", "-H"]
                                : ["--fresh", "--usable", "--repeat", "--interval", "--store", "--policy"]
        var rest = arguments.dropFirst()[...]
        while let argument = rest.popFirst() {
            if argument == "--help" || argument == "-h" { return .help }
            if argument == "--json" { parsed.options.json = true; parsed.explain.json = true; continue }
            if explaining && argument == "--fetch-first" { parsed.explain.fetchFirst = true; continue }
            if argument.hasPrefix("-") {
                var name = argument, value: String?
                if let equals = argument.firstIndex(of: "="), !argument.hasPrefix("-H") {
                    name = String(argument[..<equals])
                    value = String(argument[argument.index(after: equals)...])
                }
                guard valued.contains(name) else {
                    throw UsageError(description: "unknown option '\(name)'")
                }
                guard let text = value ?? rest.popFirst() else { throw UsageError(description: "\(name) needs a value") }
                try parsed.set(name, text)
                continue
            }
            try parsed.setURL(argument)
        }
        return try parsed.command(first, explaining: explaining)
    }

    /// What `parse` has read so far of a `fetch` or `explain` command line.
    private struct ParsedArguments {
        var url: URL?
        var fresh: Double?, usable: Double?
        var options = FetchOptions(url: URL(string: "http://localhost/")!)
        var explain = ExplainOptions(url: URL(string: "http://localhost/")!)

        /// Takes an option that has a value (one `parse` accepted for the command).
        mutating func set(_ name: String, _ text: String) throws(UsageError) {
            switch name {
            case "--fresh": fresh = try DemoCommand.seconds(text, name)
            case "--usable": usable = try DemoCommand.seconds(text, name)
            case "--interval": options.interval = try DemoCommand.seconds(text, name)
            case "--store":
                options.store = try StoreChoice(parsing: text)
                explain.store = options.store
            case "--policy":
                guard let policy = CachingPolicy(builtInNamed: text) else {
                    throw UsageError(description: "--policy takes one of \(DemoCommand.policyNames.joined(separator: ", ")), not '\(text)'")
                }
                options.policy = policy
                explain.policy = policy
            case "--header", "-H":
                guard let colon = text.firstIndex(of: ":"),
                      case let field = text[..<colon].trimmingCharacters(in: .whitespaces), !field.isEmpty,
                      field.utf8.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") }) else {
                    throw UsageError(description: "\(name) takes 'Name: value', not '\(text)'")
                }
                explain.headers.append(.init(name: field, value: text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            default:
                guard let count = Int(text), count >= 1 else {
                    throw UsageError(description: "--repeat takes a whole number of at least 1, not '\(text)'")
                }
                options.repeatCount = count
            }
        }

        /// Takes the URL, the one argument that is not an option.
        mutating func setURL(_ argument: String) throws(UsageError) {
            guard url == nil else { throw UsageError(description: "unexpected argument '\(argument)'") }
            guard let parsed = URL(string: argument), let scheme = parsed.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", parsed.host?.isEmpty == false else {
                throw UsageError(description: "not an http or https URL: '\(argument)'")
            }
            url = parsed
        }

        /// The command, once every argument has been read.
        func command(_ first: String, explaining: Bool) throws(UsageError) -> DemoCommand {
            guard let url else { throw UsageError(description: "\(first) needs a URL") }
            var options = self.options
            options.url = url
            do {
                options.windows = try CacheWindows(fresh: fresh ?? CacheWindows.standard.fresh,
                                                   usable: usable ?? max(CacheWindows.standard.usable, fresh ?? 0))
            } catch {
                throw UsageError(description: error.description)
            }
            guard explaining else { return .fetch(options) }
            var explain = self.explain
            explain.url = url
            explain.windows = options.windows
            return .explain(explain)
        }
    }

    /// The walkthrough's only option: `--store STORE` or `--store=STORE`.
    private static func parseStoreOnly(_ arguments: [String]) throws(UsageError) -> StoreChoice {
        var rest = arguments[...]
        var store = StoreChoice.memory
        while let argument = rest.popFirst() {
            if argument.hasPrefix("--store=") {
                store = try StoreChoice(parsing: String(argument.dropFirst(8)))
            } else if argument == "--store" {
                guard let value = rest.popFirst() else { throw UsageError(description: "--store needs a value") }
                store = try StoreChoice(parsing: value)
            } else {
                throw UsageError(description: "unexpected argument '\(argument)'")
            }
        }
        return store
    }

    private static func seconds(_ text: String, _ name: String) throws(UsageError) -> Double {
        guard let value = Double(text), value.isFinite, value >= 0 else {
            throw UsageError(description: "\(name) takes a number of seconds of at least 0, not '\(text)'")
        }
        return value
    }
}
