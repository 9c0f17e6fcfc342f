import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

@Suite("Fuzzing the decision and the transaction: no trap, no hang, the transaction's promises kept")
struct DecisionFuzzTests {
    /// Two fixed seeds (the same cases every run) and a fresh one; a failure names its seed and case.
    static let seeds = FuzzCases.seeds([0xDEC1_5104, 20_261_121])

    /// Each seed runs 500 cases, then more, up to 20,000, while within a second.
    static func cases(_ seed: UInt64) -> FuzzCases {
        FuzzCases(seed: seed, minimum: 500, maximum: 20_000, budget: .seconds(1))
    }

    /// Requests and configurations are slow to build (Foundation's URLRequest); each run
    /// draws from pools of them, made from the run's seed, and combines them with new entries,
    /// times and responses every case.
    static let poolSize = 256

    /// The pools of requests and configurations of the run with `seed`.
    static func pools(_ seed: UInt64) -> (requests: [URLRequest], configurations: [CacheConfiguration]) {
        var fuzzer = DecisionFuzzer(seed: seed)
        let requests = (0..<poolSize).map { _ in fuzzer.request() }
        return (requests, (0..<poolSize).map { _ in fuzzer.configuration() })
    }

    @Test("CacheDecision.evaluate: plans are coherent, and the answers built from them say a whole Age in 0...2^31", arguments: seeds)
    func decision(seed: UInt64) {
        let pools = Self.pools(seed)
        var problems: [String] = []
        let ran = Self.cases(seed).run { fuzzCase in
            var fuzzer = DecisionFuzzer(seed: fuzzCase.seed)
            let request = fuzzer.pick(pools.requests), configuration = fuzzer.pick(pools.configurations)
            let found = Self.decisionProblems(&fuzzer, request: request, configuration: configuration)
            problems += found.map { "\(fuzzCase.label): \($0)" }
        }
        #expect(ran >= 500)
        #expect(problems.isEmpty, "\(problems.count) problems in \(ran) cases; first: \(problems.prefix(5))")
    }

    /// The broken promises of one decision on a random entry at a random time.
    static func decisionProblems(_ fuzzer: inout DecisionFuzzer, request: URLRequest, configuration: CacheConfiguration) -> [String] {
        let entry: CacheEntry? = fuzzer.int(0...4) == 0 ? nil : fuzzer.entry()
        let evaluation = CacheDecision.evaluate(request: request, entry: entry, otherVariant: fuzzer.bool(), now: fuzzer.date(),
                                                configuration: configuration)
        var problems: [String] = []
        func problem(_ text: String) { problems.append("\(text) (\(evaluation.action))") }
        if let entry { _ = CacheDecision.usefulUntil(entry, configuration: configuration) }
        switch evaluation.action {
        case .serve(let plan):
            guard let entry else { problem("served without an entry"); break }
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
        return problems
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
        case .openWriter: "openWriter"
        case .appendToWriter(let data): "appendToWriter(\(data.count))"
        case .commitWriter(let entries, _, _): "commitWriter(\(entries.count))"
        case .discardWriter: "discardWriter"
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
        let pools = Self.pools(seed)
        var problems: [String] = []
        let ran = Self.cases(seed).run { fuzzCase in
            var fuzzer = DecisionFuzzer(seed: fuzzCase.seed)
            let request = fuzzer.pick(pools.requests), configuration = fuzzer.pick(pools.configurations)
            let found = Self.transactionProblems(&fuzzer, request: request, configuration: configuration)
            problems += found.map { "\(fuzzCase.label): \($0)" }
        }
        #expect(ran >= 500)
        #expect(problems.isEmpty, "\(problems.count) problems in \(ran) cases; first: \(problems.prefix(3))")
    }

    /// The broken promises of one transaction, started on a random entry (or as a refresh of
    /// one) and fed random inputs.
    static func transactionProblems(_ fuzzer: inout DecisionFuzzer, request: URLRequest, configuration: CacheConfiguration) -> [String] {
        let refresh = fuzzer.int(0...3) == 0
        let entry: CacheEntry? = refresh || fuzzer.bool() ? fuzzer.entry() : nil
        let role: CacheTransaction.Role = refresh ? .refresh(previous: entry!) : .foreground(streaming: fuzzer.bool())
        var transaction = CacheTransaction(CacheTransaction.Context(
            request: request, headers: RequestHeaders(request), key: CacheKey(url: DecisionFuzzer.url), configuration: configuration,
            role: role, maxEntrySize: fuzzer.pick([0, 1, 10, 1000, .max]), credentialed: fuzzer.bool(), entryWindows: fuzzer.windows()))
        let inputs = Self.inputs(&fuzzer)
        var checker = TransactionChecker(refresh: refresh)
        let started = transaction.start(entry: entry, otherVariant: fuzzer.bool(), now: fuzzer.date())
        checker.check(started, from: "start", removalAllowed: true, isDone: transaction.isDone)
        for input in inputs {
            let now = fuzzer.bool() ? fuzzer.base : fuzzer.date()
            Self.feed(input, to: &transaction, entry: entry, now: now, checker: &checker)
        }
        checker.checkCompletions()
        if transaction.isDone && checker.writerOpen { checker.problem("the transaction ended with its store writer open") }
        return checker.problems
    }

    /// Gives one input to the transaction and checks what it does.
    static func feed(_ input: Input, to transaction: inout CacheTransaction, entry: CacheEntry?, now: Date,
                     checker: inout TransactionChecker) {
        let actions: [CacheTransaction.Action]
        var removalAllowed = false
        switch input {
        case .head(let head):
            // Only a final answer that supersedes the entry removes it: never a 304, a 206, an error or a 5xx.
            removalAllowed = (200..<400).contains(head.statusCode) && head.statusCode != 304 && head.statusCode != 206
            actions = transaction.head(head, now: now)
        case .body(let data): actions = transaction.body(data)
        case .end: actions = transaction.end(now: now)
        case .fail(let error): actions = transaction.fail(error, now: now)
        case .cancel: actions = transaction.cancel()
        case .collapsed(let other): actions = transaction.collapsed(into: other)
        case .start: actions = transaction.start(entry: entry, now: now)
        }
        checker.check(actions, from: "\(input)", removalAllowed: removalAllowed, isDone: transaction.isDone)
        guard case .cancel = input else { return }
        if actions.contains(where: { $0 != .cancelForward && $0 != .discardWriter }) {
            checker.problem("cancel did more than cancel the request in flight and discard what was written")
        }
        checker.ended = true
        if !transaction.isDone { checker.problem("cancelled but not done") }
    }
}

/// What a fuzzed transaction has done so far, and every promise it broke, each with the trace
/// of inputs and actions that led to it.
struct TransactionChecker {
    let refresh: Bool
    var ended = false, responded = false, served = false, failed = false, finished = false
    var completions = 0
    /// Whether a store writer is open: every one opened is committed or discarded, once.
    var writerOpen = false
    var history: [(input: String, actions: [CacheTransaction.Action])] = [] // actions formatted only for a problem
    var problems: [String] = []

    init(refresh: Bool) { self.refresh = refresh }

    mutating func problem(_ text: String) {
        let trace = history.map { "\($0.input) -> \($0.actions.map(DecisionFuzzTests.name))" }
        problems.append("\(text); trace \(trace)")
    }

    /// Checks the actions one input gave.
    mutating func check(_ actions: [CacheTransaction.Action], from input: String, removalAllowed: Bool, isDone: Bool) {
        history.append((input, actions))
        for action in actions { check(action, from: input, removalAllowed: removalAllowed) }
        if ended && !isDone { problem("ended but not done") }
    }

    /// At most one completion: a finish, a failure or an answer from the store.
    mutating func checkCompletions() {
        if completions > 1 { problem("\(completions) completions (finish \(finished), fail \(failed), serve \(served))") }
    }

    private mutating func check(_ action: CacheTransaction.Action, from input: String, removalAllowed: Bool) {
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
        case .openWriter:
            if writerOpen || ended { problem("a writer opened twice, or after the end") }
            writerOpen = true
        case .appendToWriter:
            if !writerOpen { problem("written to no open writer") }
        case .commitWriter:
            if !writerOpen || ended { problem("a commit with no open writer, or after the end") }
            writerOpen = false
        case .discardWriter:
            if !writerOpen { problem("discarded no open writer") }
            writerOpen = false
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
}
