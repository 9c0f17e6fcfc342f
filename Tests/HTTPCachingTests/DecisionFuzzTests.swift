import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// Random requests, entries, configurations and times for the decision and the transaction:
/// valid values, hostile ones (`nan`, 20 digits, dates in year 0 or 9999), and noise.
struct DecisionFuzzer {
    var fields: FieldFuzzer
    let base = Date(timeIntervalSince1970: 1_767_225_600) // 2026-01-01

    init(seed: UInt64) { fields = FieldFuzzer(seed: seed) }

    mutating func int(_ range: ClosedRange<Int>) -> Int { fields.int(range) }
    mutating func bool() -> Bool { int(0...1) == 0 }
    mutating func pick<T>(_ options: [T]) -> T { options[int(0...(options.count - 1))] }

    static let cacheControl = [
        "max-age=60", "max-age=0", "max-age=18446744073709551615", "max-age=99999999999999999999", "max-age=nan", "max-age=-1",
        "max-age", "no-cache", "no-store", "must-revalidate", "proxy-revalidate", "immutable", "private", "public", "must-understand",
        "stale-while-revalidate=30", "stale-while-revalidate=99999999999999999999", "stale-if-error=86400", "stale-if-error=1e20",
        "max-stale", "max-stale=5", "max-stale=abc", "min-fresh=10", "min-fresh=99999999999999999999", "only-if-cached",
    ]
    static let dates = ["Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 2026 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
                        "Mon, 01 Jan 0001 00:00:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "0", "-1", "yesterday"]
    static let ages = ["0", "5", "nan", "inf", "-1", "1e20", "99999999999999999999", "18446744073709551615", "5, 10", "", "7200.0"]
    static let etags = ["\"a\"", "W/\"a\"", "\"b\"", "*", "\"a\", \"b\"", "W/", ""]
    static let varies = ["Accept-Language", "*", "Cookie", "Authorization, Accept", "X-A, x-a", "bad name"]
    static let lengths = ["0", "3", "99999999999999999999", "-1", "abc", "18446744073709551616"]
    static let ranges = ["bytes=0-1", "bytes=-5", "bytes=5-", "bytes=99999999999999999999-", "bytes=0-99999999999999999999",
                         "bytes=0-1,2-3", "bytes=5-1", "items=0-1", "bytes=-0", "bytes=-99999999999999999999", "garbage"]

    /// A value for a field: usually a plausible one for that field, sometimes noise.
    mutating func value(for name: String) -> String {
        if int(0...5) == 0 { return fields.string() }
        switch name.lowercased() {
        case "cache-control": return (0..<int(1...3)).map { _ in pick(Self.cacheControl) }.joined(separator: ", ")
        case "age": return pick(Self.ages)
        case "date", "expires", "last-modified", "if-modified-since": return pick(Self.dates)
        case "etag", "if-none-match": return pick(Self.etags)
        case "vary": return pick(Self.varies)
        case "content-length": return pick(Self.lengths)
        case "range": return pick(Self.ranges)
        case "pragma": return "no-cache"
        case "connection": return pick(["close", "keep-alive, X-Hop", "X-A"])
        case "location", "content-location": return pick(["/other", "http://example.test/x", "http://elsewhere.test/y", "::"])
        case "x-http-caching-windows": return pick(["fresh=1, usable=2", "fresh=nan, usable=1", "fresh=5, usable=1", "fresh=1e308, usable=inf"])
        case "x-http-caching-policy": return pick(["two-tier", "http", "cache-first", "cache-only", "network-only", "custom", "nope"])
        default: return fields.string()
        }
    }

    static let responseFields = ["Cache-Control", "Age", "Date", "Expires", "Last-Modified", "ETag", "Vary", "Content-Length",
                                 "Set-Cookie", "Connection", "X-Hop", "Content-Range", "Location", "Content-Location", "Pragma", "X-Other"]
    static let requestFields = ["Cache-Control", "Pragma", "Range", "If-None-Match", "If-Modified-Since", "Authorization", "Cookie",
                                "X-API-Key", "Accept-Language", "Accept", "X-HTTP-Caching-Windows", "X-HTTP-Caching-Policy"]

    mutating func headers(_ names: [String]) -> [String: String] {
        var headers: [String: String] = [:]
        for _ in 0..<int(0...6) {
            let name = pick(names)
            headers[bool() ? name : name.lowercased()] = value(for: name)
        }
        return headers
    }

    /// A time: near the base, far from it, or at the edges of what a Date holds.
    mutating func date() -> Date {
        switch int(0...9) {
        case 0: return pick([.distantPast, .distantFuture, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1e15),
                             Date(timeIntervalSince1970: -1e15)])
        case 1: return base.addingTimeInterval(TimeInterval(int(-1_000_000_000...1_000_000_000)))
        default: return base.addingTimeInterval(TimeInterval(int(-300_000...300_000)))
        }
    }

    mutating func windows() -> CacheWindows? {
        switch int(0...4) {
        case 0: return nil
        case 1: return .test(fresh: 0, usable: 0)
        case 2: return .test(fresh: 1e300, usable: 1e300)
        default:
            let fresh = TimeInterval(int(0...100_000))
            return .test(fresh: fresh, usable: fresh + TimeInterval(int(0...1_000_000)))
        }
    }

    static let url = URL(string: "http://example.test/fuzz?q=1")!

    mutating func entry() -> CacheEntry {
        var storedAt = date()
        if int(0...40) == 0 { storedAt = Date(timeIntervalSince1970: pick([.nan, .infinity, -.infinity])) } // a damaged store
        var varyValues: [String: String] = [:]
        if bool() { varyValues["accept-language"] = pick(["en", "fr"]) }
        return CacheEntry(key: CacheKey(url: Self.url), url: Self.url,
                          statusCode: pick([200, 203, 204, 206, 300, 301, 302, 304, 307, 308, 404, 410, 500, 503, 999, 0, -1]),
                          headers: headers(Self.responseFields), body: Data((0..<int(0...64)).map { UInt8(truncatingIfNeeded: $0) }),
                          storedAt: storedAt, windows: windows(), varyValues: varyValues)
    }

    mutating func request() -> URLRequest {
        var request = URLRequest(url: Self.url)
        request.httpMethod = pick(["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "FOO", "get"])
        request.cachePolicy = pick([.useProtocolCachePolicy, .useProtocolCachePolicy, .reloadIgnoringLocalCacheData,
                                    .reloadIgnoringLocalAndRemoteCacheData, .returnCacheDataElseLoad, .returnCacheDataDontLoad,
                                    .reloadRevalidatingCacheData])
        for (name, value) in headers(Self.requestFields) { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    mutating func configuration() -> CacheConfiguration {
        let custom = CachingPolicy.custom("custom", FixedVerdict(verdict: pick([.fresh, .stale, .revalidate, .network])))
        return CacheConfiguration(windows: windows() ?? .standard,
                                  storableStatusCodes: bool() ? CacheConfiguration.defaultStorableStatusCodes : [200, 206, 304, 500, -1],
                                  policy: pick([.twoTier, .httpSemantics, .cacheFirst, .cacheOnly, .networkOnly, custom]),
                                  customPolicies: [custom],
                                  errorFallbackWindow: pick([nil, 0, 60, 7 * 86_400, 1e300, .infinity, .nan]),
                                  storesCredentialedResponses: bool(), storesResponsesSettingCookies: bool(),
                                  honorsOriginDirectives: bool())
    }

    mutating func responseHead() -> ResponseHead {
        ResponseHead(statusCode: pick([200, 200, 200, 203, 204, 206, 301, 302, 304, 304, 400, 403, 404, 500, 503, 100, 999]),
                     headers: headers(Self.responseFields), url: Self.url)
    }
}

@Suite("Fuzzing the decision and the transaction: no trap, no hang, the transaction's promises kept")
struct DecisionFuzzTests {
    /// Fixed seeds (reproducible) and a fresh one each run; a failing case names its seed.
    static let seeds: [UInt64] = [0xDEC1_5104, 20_261_121, UInt64.random(in: .min ... .max)]
    /// Each seed's run stops at this many cases or at the time budget, whichever comes first.
    static let iterations = 20_000
    static let budget: TimeInterval = 1.0

    /// Requests and configurations are slow to build (Foundation's URLRequest); each run
    /// draws from pools of them, made fresh from the seed, and combines them with new entries,
    /// times and responses every case.
    static let poolSize = 256

    @Test("CacheDecision.evaluate: plans are coherent, and the answers built from them say a whole Age in 0...2^31", arguments: seeds)
    func decision(seed: UInt64) {
        var fuzzer = DecisionFuzzer(seed: seed)
        let requests = (0..<Self.poolSize).map { _ in fuzzer.request() }
        let configurations = (0..<Self.poolSize).map { _ in fuzzer.configuration() }
        var problems: [String] = []
        let start = Date()
        var cases = 0
        while cases < Self.iterations && Date().timeIntervalSince(start) < Self.budget {
            cases += 1
            let request = fuzzer.pick(requests)
            let entry: CacheEntry? = fuzzer.int(0...4) == 0 ? nil : fuzzer.entry()
            let configuration = fuzzer.pick(configurations)
            let now = fuzzer.date()
            let evaluation = CacheDecision.evaluate(request: request, entry: entry, otherVariant: fuzzer.bool(), now: now,
                                                    configuration: configuration)
            func problem(_ text: String) { problems.append("seed \(seed) case \(cases): \(text) (\(evaluation.action))") }
            if let entry { _ = CacheDecision.usefulUntil(entry, configuration: configuration) }
            switch evaluation.action {
            case .serve(let plan):
                guard let entry else { problem("served without an entry"); continue }
                if plan.age.isNaN || plan.age < 0 { problem("age \(plan.age)") }
                if plan.ttl.isNaN { problem("ttl is NaN") }
                if case .range(let bytes) = plan.form, bytes.lowerBound < 0 || bytes.upperBound >= entry.body.count {
                    problem("range \(bytes) outside \(entry.body.count) bytes")
                }
                let disposition = Disposition(status: plan.status, hit: true, ttl: plan.ttl, age: plan.age)
                let (head, body) = Answers.fromEntry(entry, form: plan.form, disposition: disposition, cacheName: "HTTPCaching")
                if body.lowerBound < 0 || body.upperBound > entry.body.count { problem("body \(body) outside \(entry.body.count) bytes") }
                let age = head.header("Age").flatMap { HTTPFieldParsing.deltaSeconds($0) }
                if age == nil { problem("Age \(head.header("Age") ?? "none")") }
            case .forward(let plan):
                if plan.passThrough && plan.store { problem("a pass-through that stores") }
                if plan.discardEntry && (entry == nil || plan.fallback || plan.validate) { problem("discards an entry it still needs") }
                if plan.validate && !(entry.map(Validation.hasValidator) ?? false) { problem("validates without a validator") }
                if plan.fallback && entry == nil { problem("a fallback without an entry") }
            case .fail:
                break
            }
        }
        #expect(problems.isEmpty, "\(problems.count) problems in \(cases) cases; first: \(problems.prefix(5))")
    }

    /// An action's name, without its values (a damaged entry's NaN date would trap
    /// `Date.description`).
    static func name(_ action: CacheTransaction.Action) -> String {
        switch action {
        case .emit: "emit"
        case .serve: "serve"
        case .forward(let conditional): conditional.isEmpty ? "forward" : "forward(conditional)"
        case .cancelForward: "cancelForward"
        case .respond(let head, _): "respond(\(head.statusCode))"
        case .deliver(let data): "deliver(\(data.count))"
        case .finish: "finish"
        case .fail: "fail"
        case .store: "store"
        case .storeInMemory: "storeInMemory"
        case .askToStore: "askToStore"
        case .remove: "remove"
        case .invalidate: "invalidate"
        case .refresh: "refresh"
        }
    }

    /// One input to a transaction.
    enum Input: CustomStringConvertible {
        case head(ResponseHead), body(Data), end, fail(TransactionError), cancel, collapsed(CacheEntry?), start

        var description: String {
            switch self {
            case .head(let head): "head(\(head.statusCode))"
            case .body(let data): "body(\(data.count))"
            case .end: "end"
            case .fail(let error): "fail(\(error.isCancellation ? "cancelled" : "error"))"
            case .cancel: "cancel"
            case .collapsed(let entry): "collapsed(\(entry == nil ? "nil" : "entry"))"
            case .start: "start again"
            }
        }
    }

    static func inputs(_ fuzzer: inout DecisionFuzzer) -> [Input] {
        func error() -> TransactionError {
            fuzzer.pick([TransactionError(URLError(.cannotConnectToHost)), TransactionError(URLError(.timedOut)),
                         TransactionError(URLError(.cancelled)), TransactionError(URLError(.networkConnectionLost))])
        }
        func random() -> Input {
            switch fuzzer.int(0...7) {
            case 0, 1: .head(fuzzer.responseHead())
            case 2, 3: .body(Data(repeating: 7, count: fuzzer.int(0...20)))
            case 4: .end
            case 5: .fail(error())
            case 6: fuzzer.int(0...2) == 0 ? .cancel : .collapsed(fuzzer.bool() ? nil : fuzzer.entry())
            default: .start
            }
        }
        if fuzzer.int(0...2) == 0 { return (0..<fuzzer.int(0...12)).map { _ in random() } }
        // Mostly in the order the network reports things, with a second head after a retry.
        var sequence: [Input] = [.head(fuzzer.responseHead())]
        if fuzzer.int(0...3) == 0 { sequence.append(.head(fuzzer.responseHead())) }
        sequence += (0..<fuzzer.int(0...4)).map { _ in .body(Data(repeating: 1, count: fuzzer.int(0...20))) }
        sequence.append(fuzzer.int(0...4) == 0 ? .fail(error()) : .end)
        if fuzzer.int(0...4) == 0 { sequence.insert(.cancel, at: fuzzer.int(0...sequence.count)) }
        return sequence
    }

    @Test("CacheTransaction driven by random heads, bodies, ends, errors and cancels in random orders keeps its promises", arguments: seeds)
    func transaction(seed: UInt64) {
        var fuzzer = DecisionFuzzer(seed: seed)
        let requests = (0..<Self.poolSize).map { _ in fuzzer.request() }
        let configurations = (0..<Self.poolSize).map { _ in fuzzer.configuration() }
        var problems: [String] = []
        let start = Date()
        var cases = 0
        while cases < Self.iterations && Date().timeIntervalSince(start) < Self.budget {
            cases += 1
            let request = fuzzer.pick(requests)
            let configuration = fuzzer.pick(configurations)
            let refresh = fuzzer.int(0...3) == 0
            let entry: CacheEntry? = refresh || fuzzer.bool() ? fuzzer.entry() : nil
            let role: CacheTransaction.Role = refresh ? .refresh(previous: entry!) : .foreground(streaming: fuzzer.bool())
            var transaction = CacheTransaction(CacheTransaction.Context(
                request: request, headers: RequestHeaders(request), key: CacheKey(url: DecisionFuzzer.url), configuration: configuration,
                role: role, maxEntrySize: fuzzer.pick([0, 1, 10, 1000, .max]), credentialed: fuzzer.bool(), entryWindows: fuzzer.windows()))
            let inputs = Self.inputs(&fuzzer)
            var history: [(input: String, actions: [CacheTransaction.Action])] = [] // actions formatted only for a problem
            func problem(_ text: String) {
                let trace = history.map { "\($0.input) -> \($0.actions.map(Self.name))" }
                problems.append("seed \(seed) case \(cases): \(text); trace \(trace)")
            }

            var ended = false, completions = 0, responded = false, served = false, failed = false, finished = false
            func check(_ actions: [CacheTransaction.Action], from input: String, removalAllowed: Bool) {
                history.append((input, actions))
                for action in actions {
                    switch action {
                    case .deliver:
                        if ended { problem("deliver after the end") }
                        if !responded { problem("deliver before a response head") }
                        if refresh { problem("a refresh delivers") }
                    case .finish:
                        if ended { problem("finish after the end") }
                        finished = true; completions += 1; ended = true
                    case .fail:
                        if ended { problem("fail after the end") }
                        failed = true; completions += 1; ended = true
                    case .serve:
                        if ended { problem("serve after the end") }
                        if responded { problem("serve after a response head") }
                        if refresh { problem("a refresh serves") }
                        served = true; completions += 1; ended = true
                    case .respond:
                        if ended || responded || served { problem("a second head, or one after the end") }
                        if refresh { problem("a refresh responds") }
                        responded = true
                    case .store, .storeInMemory:
                        if ended { problem("store after finish") }
                    case .askToStore:
                        problem("asked a delegate that no context has")
                    case .remove:
                        if ended { problem("remove after the end") }
                        if !removalAllowed { problem("remove on \(input)") }
                        if refresh { problem("a refresh removes") }
                    case .forward:
                        if ended { problem("forward after the end") }
                    case .emit, .cancelForward, .invalidate, .refresh:
                        break
                    }
                }
                if ended && !transaction.isDone { problem("ended but not done") }
            }

            check(transaction.start(entry: entry, otherVariant: fuzzer.bool(), now: fuzzer.date()), from: "start", removalAllowed: true)
            for input in inputs {
                let now = fuzzer.bool() ? fuzzer.base : fuzzer.date()
                switch input {
                case .head(let head):
                    // Only a final answer that supersedes the entry removes it: never a 304, a 206, an error or a 5xx.
                    let supersedes = (200..<400).contains(head.statusCode) && head.statusCode != 304 && head.statusCode != 206
                    check(transaction.head(head, now: now), from: "\(input)", removalAllowed: supersedes)
                case .body(let data): check(transaction.body(data), from: "\(input)", removalAllowed: false)
                case .end: check(transaction.end(now: now), from: "\(input)", removalAllowed: false)
                case .fail(let error): check(transaction.fail(error, now: now), from: "\(input)", removalAllowed: false)
                case .cancel:
                    let actions = transaction.cancel()
                    check(actions, from: "\(input)", removalAllowed: false)
                    if actions.contains(where: { $0 != .cancelForward }) { problem("cancel did more than cancel the request in flight") }
                    ended = true
                    if !transaction.isDone { problem("cancelled but not done") }
                case .collapsed(let other): check(transaction.collapsed(into: other), from: "\(input)", removalAllowed: false)
                case .start: check(transaction.start(entry: entry, now: now), from: "\(input)", removalAllowed: false)
                }
            }
            if completions > 1 { problem("\(completions) completions (finish \(finished), fail \(failed), serve \(served))") }
        }
        #expect(problems.isEmpty, "\(problems.count) problems in \(cases) cases; first: \(problems.prefix(3))")
    }
}
