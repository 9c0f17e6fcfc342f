import Foundation
import HTTPCaching

/// What the command line asked for. Parsing is pure so the tests can check every case.
enum DemoCommand: Equatable {
    /// The guided walkthrough against the embedded origin, on a store; with `svgPath`, also
    /// written as an SVG timeline there.
    case walkthrough(StoreChoice, svgPath: String? = nil)
    /// Fetch a URL through the cache, repeatedly.
    case fetch(FetchOptions)
    /// Explain what the cache would do with a request for a URL, and why.
    case explain(ExplainOptions)
    /// Report what a store holds, reading the store only.
    case stats(StatsOptions)
    /// Print the usage.
    case help
}

/// `cache-demo stats [--store STORE] [--json]`: a store's entries and bytes, oldest and newest.
struct StatsOptions: Equatable {
    var store = StoreChoice.memory
    var json = false
}

/// How `fetch --stats` prints the cache's statistics at the end.
enum StatsFormat: String, Equatable {
    /// A table for people (with `--json`: one JSON line `{"stats":{...}}`).
    case table
    /// The Prometheus text exposition format, as a `/metrics` route would serve it.
    case prometheus
}

/// Where the demo's cache keeps its entries.
enum StoreChoice: Equatable {
    /// In memory: gone when the demo exits.
    case memory
    /// On disk (a memory tier in front), in the given directory or the default one.
    case disk(path: String?)
    /// In Redis, at `redis://[user:password@]host:port[/db]`, on the Redis Cluster at
    /// `redis-cluster://[user:password@]host:port[,host:port...]` (`rediss://` and
    /// `rediss-cluster://` over TLS), or on the primary the sentinels at
    /// `redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername` name, under
    /// the prefix `cache-demo:`.
    case redis(url: String)

    init(parsing text: String) throws(UsageError) {
        if text == "memory" { self = .memory; return }
        if text == "disk" { self = .disk(path: nil); return }
        if text.hasPrefix("disk:"), text.count > 5 { self = .disk(path: String(text.dropFirst(5))); return }
        if text.lowercased().hasPrefix("redis") {
            do {
                _ = try RedisConfiguration(url: text)
            } catch {
                throw UsageError(description: "--store takes redis://[user:password@]host:port[/db], "
                                 + "redis-cluster://[user:password@]host:port[,host:port...], "
                                 + "redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername, or rediss:// and "
                                 + "rediss-cluster:// for TLS (?cacert=PATH for a private CA): \(error)")
            }
            self = .redis(url: text)
            return
        }
        throw UsageError(description: "--store takes memory, disk, disk:PATH, redis://[user:password@]host:port[/db], "
                         + "redis-cluster://[user:password@]host:port[,host:port...] or "
                         + "redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername, not '\(text)'")
    }

    func makeStore() throws -> any ResponseStore {
        switch self {
        case .memory:
            return MemoryResponseStore()
        case .disk:
            return TieredResponseStore(back: try DiskResponseStore(directory: diskDirectory ?? DiskResponseStore.defaultDirectory))
        case .redis(let url):
            return try RedisResponseStore(url: url, keyPrefix: "cache-demo:")
        }
    }
}

/// `cache-demo fetch URL ...`: what to send, through which cache, how often, and how to report it.
struct FetchOptions: Equatable {
    /// An http or https URL, or a path alone (`/search?x=1`): the embedded origin's.
    var url: URL
    var store = StoreChoice.memory
    var policy = CachingPolicy.twoTier
    var windows = CacheWindows.standard
    var repeatCount = 1
    var interval: TimeInterval = 0
    var json = false
    /// Print the statistics at the end, and how; nil: do not.
    var stats: StatsFormat?
    /// The method, `-X METHOD`; nil: GET, or POST when there is a body (as curl does).
    var method: String?
    /// Header fields sent with every request, `-H 'Name: value'`.
    var headers: [HeaderField] = []
    /// The request bodies, `--data` or `--data-file`, each sent by a request of its own, in turn;
    /// empty: no body.
    var bodies: [RequestBody] = []
    /// Whether each request's body is part of its key (`URLRequest.keysBody`), `--key-body`: a
    /// POST is then cached as a QUERY is.
    var keysBody = false
    /// Whether 206 answers are stored as parts (`CacheConfiguration.storesPartialContent`),
    /// `--partial`; the embedded origin then answers GETs with ranges of a 64 KiB file.
    var storesPartialContent = false
}

/// A request header field, `-H 'Name: value'`.
struct HeaderField: Equatable {
    var name: String
    var value: String
}

/// `cache-demo explain URL ...`: what the cache would do with a GET for the URL, from the
/// store, without the network (unless `--fetch-first`).
struct ExplainOptions: Equatable {
    /// A request header field, `--header 'Name: value'`.
    typealias Header = HeaderField

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

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) throws(UsageError) -> DemoCommand {
        guard let first = arguments.first else { return .walkthrough(.memory) }
        if first == "--help" || first == "-h" || first == "help" { return .help }
        if first.hasPrefix("-") { return try parseWalkthrough(arguments[...]) }
        if first == "stats" { return try parseStats(arguments.dropFirst()) }
        guard first == "fetch" || first == "explain" else { throw UsageError(description: "unknown command '\(first)'") }
        let explaining = first == "explain"

        var parsed = ParsedArguments()
        let valued = explaining ? ["--fresh", "--usable", "--store", "--policy", "--header", "-H"]
                                : ["--fresh", "--usable", "--repeat", "--interval", "--store", "--policy", "--header", "-H"]
                                  + FetchOptions.requestOptions
        var rest = arguments.dropFirst()[...]
        while let argument = rest.popFirst() {
            if argument == "--help" || argument == "-h" { return .help }
            if argument == "--json" { parsed.options.json = true; parsed.explain.json = true; continue }
            if explaining && argument == "--fetch-first" { parsed.explain.fetchFirst = true; continue }
            if !explaining && argument == "--key-body" { parsed.options.keysBody = true; continue }
            if !explaining && argument == "--partial" { parsed.options.storesPartialContent = true; continue }
            if !explaining && (argument == "--stats" || argument.hasPrefix("--stats=")) {
                try parsed.setStats(argument, next: &rest)
                continue
            }
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
            try parsed.setURL(argument, pathAllowed: !explaining)
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
                options.headers = explain.headers
            case _ where FetchOptions.requestOptions.contains(name):
                try options.setRequestOption(name, text)
            default:
                guard let count = Int(text), count >= 1 else {
                    throw UsageError(description: "--repeat takes a whole number of at least 1, not '\(text)'")
                }
                options.repeatCount = count
            }
        }

        /// Takes `--stats`, `--stats=FORMAT` or `--stats FORMAT` (a following `table` or
        /// `prometheus`, which cannot be a URL).
        mutating func setStats(_ argument: String, next rest: inout ArraySlice<String>) throws(UsageError) {
            var text = argument == "--stats" ? "table" : String(argument.dropFirst("--stats=".count))
            if argument == "--stats", let following = rest.first, StatsFormat(rawValue: following) != nil {
                text = following
                rest.removeFirst()
            }
            guard let format = StatsFormat(rawValue: text) else {
                throw UsageError(description: "--stats takes table or prometheus, not '\(text)'")
            }
            options.stats = format
        }

        /// Takes the URL, the one argument that is not an option; for `fetch`, a path alone
        /// (`/search`) is the embedded origin's.
        mutating func setURL(_ argument: String, pathAllowed: Bool) throws(UsageError) {
            guard url == nil else { throw UsageError(description: "unexpected argument '\(argument)'") }
            if pathAllowed, argument.hasPrefix("/"), !argument.hasPrefix("//"), let path = URL(string: argument) {
                url = path
                return
            }
            guard let parsed = URL(string: argument), let scheme = parsed.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", parsed.host?.isEmpty == false else {
                let alternative = pathAllowed ? " nor a /path on the embedded origin" : ""
                throw UsageError(description: "not an http or https URL\(alternative): '\(argument)'")
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
            if options.json && options.stats == .prometheus {
                throw UsageError(description: "--stats=prometheus prints text, not JSON: leave out --json, or use --json --stats for a JSON line")
            }
            guard explaining else {
                try options.checkRequest()
                return .fetch(options)
            }
            var explain = self.explain
            explain.url = url
            explain.windows = options.windows
            return .explain(explain)
        }
    }

    /// The walkthrough's options: `--store STORE` and `--svg PATH`, each also as `--name=value`.
    private static func parseWalkthrough(_ arguments: ArraySlice<String>) throws(UsageError) -> DemoCommand {
        var rest = arguments
        var store = StoreChoice.memory, svgPath: String?
        while let (name, value) = try nextOption(&rest, valued: ["--store", "--svg"], flags: []) {
            if name == "--help" || name == "-h" { return .help }
            if name == "--store" { store = try StoreChoice(parsing: value) }
            if name == "--svg" {
                guard !value.isEmpty else { throw UsageError(description: "--svg needs a file path") }
                svgPath = value
            }
        }
        return .walkthrough(store, svgPath: svgPath)
    }

    /// `stats`'s options: `--store STORE` (or `--store=STORE`) and `--json`.
    private static func parseStats(_ arguments: ArraySlice<String>) throws(UsageError) -> DemoCommand {
        var rest = arguments
        var options = StatsOptions()
        while let (name, value) = try nextOption(&rest, valued: ["--store"], flags: ["--json"]) {
            if name == "--help" || name == "-h" { return .help }
            if name == "--store" { options.store = try StoreChoice(parsing: value) }
            if name == "--json" { options.json = true }
        }
        return .stats(options)
    }

    /// The next option of a command that takes no URL, and its value ("" for a flag); nil
    /// at the end. `--help` and `-h` come back as flags.
    private static func nextOption(_ rest: inout ArraySlice<String>, valued: [String],
                                   flags: [String]) throws(UsageError) -> (String, String)? {
        guard let argument = rest.popFirst() else { return nil }
        if flags.contains(argument) || argument == "--help" || argument == "-h" { return (argument, "") }
        guard argument.hasPrefix("-") else { throw UsageError(description: "unexpected argument '\(argument)'") }
        let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        guard valued.contains(name) else { throw UsageError(description: "unknown option '\(name)'") }
        if parts.count == 2 { return (name, String(parts[1])) }
        guard let value = rest.popFirst() else { throw UsageError(description: "\(name) needs a value") }
        return (name, value)
    }

    private static func seconds(_ text: String, _ name: String) throws(UsageError) -> Double {
        guard let value = Double(text), value.isFinite, value >= 0 else {
            throw UsageError(description: "\(name) takes a number of seconds of at least 0, not '\(text)'")
        }
        return value
    }
}
