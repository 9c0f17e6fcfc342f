import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import HTTPCaching

/// The transaction, driven input by input without a socket: every branch of the response half.
@Suite("The transaction: pure, every branch")
struct CacheTransactionTests {
    static let url = URL(string: "http://example.test/t")!
    static let t0 = Date(timeIntervalSince1970: 2_000_000)

    static func entry(headers: [String: String] = ["ETag": "\"v1\""], body: String = "old", age: TimeInterval = 0,
                      status: Int = 200) -> CacheEntry {
        CacheEntry(key: CacheKey(url: url), url: url, statusCode: status, headers: headers, body: Data(body.utf8),
                   storedAt: t0.addingTimeInterval(-age))
    }

    static func head(_ status: Int, _ headers: [String: String] = [:]) -> ResponseHead {
        ResponseHead(statusCode: status, headers: headers, url: url)
    }

    static func transaction(_ request: URLRequest = URLRequest(url: url), role: CacheTransaction.Role = .foreground(streaming: false),
                            configuration: CacheConfiguration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600)),
                            maxEntrySize: Int = .max) -> CacheTransaction {
        CacheTransaction(CacheTransaction.Context(request: request, headers: RequestHeaders(request), key: CacheKey(url: url),
                                                  configuration: configuration, role: role, maxEntrySize: maxEntrySize))
    }

    /// A short, comparable description of actions.
    static func names(_ actions: [CacheTransaction.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .emit(let kind):
                if let status = kind.status { "served(\(status.rawValue))" }
                else if let reason = kind.notStoredReason { "notStored(\(reason))" }
                else if let changed = kind.bodyChanged { "refreshed(\(changed))" }
                else if kind.name == "refreshFailed" { "refreshFailed" }
                else { "\(kind)" }
            case .serve(let entry, let form, let disposition):
                "serve(\(String(decoding: entry.body, as: UTF8.self)), \(disposition.status.rawValue)\(form == .whole ? "" : ", \(form)"))"
            case .forward(let conditional): conditional.isEmpty ? "forward" : "forward(conditional)"
            case .cancelForward: "cancelForward"
            case .respond(let head, let disposition): "respond(\(head.statusCode), \(disposition.status.rawValue)\(disposition.stored ? ", stored" : ""))"
            case .deliver(let data): "deliver(\(String(decoding: data, as: UTF8.self)))"
            case .finish: "finish"
            case .fail(let error): "fail(\(error.isCancellation ? "cancelled" : String(describing: error).prefix(40)))"
            case .store(let entry): "store(\(String(decoding: entry.body, as: UTF8.self))\(entry.key.variant == nil ? "" : ", variant"))"
            case .storeInMemory(let entry):
                "storeInMemory(\(String(decoding: entry.body, as: UTF8.self))\(entry.key.variant == nil ? "" : ", variant"))"
            case .askToStore(let entry): "askToStore(\(String(decoding: entry.body, as: UTF8.self)))"
            case .openWriter: "openWriter"
            case .appendToWriter(let data): "append(\(String(decoding: data, as: UTF8.self)))"
            case .commitWriter(let entries, let bytes, let memory):
                "commit(\(entries.count) entr\(entries.count == 1 ? "y" : "ies"), \(bytes)\(memory ? ", memory" : ""))"
            case .discardWriter: "discardWriter"
            case .remove: "remove"
            case .invalidate(let urls): "invalidate(\(urls.map(\.path).joined(separator: ",")))"
            case .refresh: "refresh"
            }
        }
    }

    static let networkError = TransactionError(URLError(.cannotConnectToHost))

    // MARK: - Starting

    @Test("start: a fresh entry is served; a stale one served and refreshed; none goes to the network")
    func start() {
        var fresh = Self.transaction()
        #expect(Self.names(fresh.start(entry: Self.entry(age: 10), now: Self.t0)) == ["served(fresh)", "serve(old, fresh)"])
        #expect(fresh.isDone)
        var stale = Self.transaction()
        #expect(Self.names(stale.start(entry: Self.entry(age: 100), now: Self.t0)) == ["served(stale)", "refresh", "serve(old, stale)"])
        var miss = Self.transaction()
        #expect(Self.names(miss.start(entry: nil, now: Self.t0)) == ["forward"])
        #expect(!miss.isDone)
    }

    @Test("start: past every window with a validator, a conditional request; without one and no fallback, the entry is discarded")
    func startExpired() {
        var validating = Self.transaction()
        #expect(Self.names(validating.start(entry: Self.entry(age: 4000), now: Self.t0)) == ["forward(conditional)"])
        var useless = Self.transaction(configuration: CacheConfiguration(windows: .test(fresh: 60, usable: 3600), errorFallbackWindow: nil))
        #expect(Self.names(useless.start(entry: Self.entry(headers: [:], age: 4000), now: Self.t0)) == ["remove", "forward"])
    }

    @Test("start: only-if-cached with nothing usable is a 504 (RFC 9111 5.2.1.7), cache-only fails as notCached; an unknown policy name fails without the network")
    func startFails() {
        var request = URLRequest(url: Self.url)
        request.setValue("only-if-cached", forHTTPHeaderField: "Cache-Control")
        var onlyIfCached = Self.transaction(request)
        let gatewayTimeout = ResponseHead(statusCode: 504, headers: ["Content-Length": "0"], url: Self.url)
        #expect(onlyIfCached.start(entry: nil, now: Self.t0)
                == [.emit(.served(.miss)), .respond(gatewayTimeout, Disposition(status: .miss, detail: "only-if-cached")), .finish])
        // The cache-only policy (by name, or `.returnCacheDataDontLoad`) fails the task, the header or not.
        var named = request
        let dontLoad = URLRequest(url: Self.url, cachePolicy: .returnCacheDataDontLoad)
        named.setValue("cache-only", forHTTPHeaderField: HTTPCachingHeaders.policy)
        var dontLoadOnlyIfCached = dontLoad
        dontLoadOnlyIfCached.setValue("only-if-cached", forHTTPHeaderField: "Cache-Control")
        for asked in [named, dontLoad, dontLoadOnlyIfCached] {
            var transaction = Self.transaction(asked)
            #expect(transaction.start(entry: nil, now: Self.t0) == [.emit(.served(.miss)), .fail(.caching(.notCached))])
        }
        var unknown = URLRequest(url: Self.url)
        unknown.setValue("nope", forHTTPHeaderField: HTTPCachingHeaders.policy)
        var transaction = Self.transaction(unknown)
        let actions = transaction.start(entry: Self.entry(), now: Self.t0)
        #expect(actions == [.fail(.caching(.unknownPolicy("nope")))])
    }

    // MARK: - Bug 1: a reload that fails never deletes a fresh entry

    @Test("a reload with a fresh entry and the origin down fails the caller and removes nothing, by construction")
    func reloadFailureKeepsEntry() {
        var request = URLRequest(url: Self.url)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        var transaction = Self.transaction(request)
        let start = transaction.start(entry: Self.entry(age: 1), now: Self.t0)
        #expect(Self.names(start) == ["forward"])
        let failed = transaction.fail(Self.networkError, now: Self.t0)
        #expect(failed == [.emit(.served(.expired)), .fail(Self.networkError)])
        #expect(!(start + failed).contains { if case .remove = $0 { true } else { false } }, "a failing origin never destroys a usable entry")
        // The same for a 5xx and for a bad 304: nothing is removed.
        for status in [500, 503, 304, 206] {
            var other = Self.transaction(request)
            let actions = other.start(entry: Self.entry(age: 1), now: Self.t0) + other.head(Self.head(status), now: Self.t0)
                + other.end(now: Self.t0)
            #expect(!actions.contains { if case .remove = $0 { true } else { false } }, "status \(status)")
        }
    }

    // MARK: - The response head

    @Test("a storable answer: respond at once, then the body, then store before finish")
    func storableAnswer() {
        var transaction = Self.transaction()
        _ = transaction.start(entry: nil, now: Self.t0)
        #expect(Self.names(transaction.head(Self.head(200), now: Self.t0)) == ["served(miss)", "respond(200, miss, stored)"])
        #expect(Self.names(transaction.body(Data("ne".utf8))) == [])
        #expect(Self.names(transaction.body(Data("w".utf8))) == [])
        #expect(Self.names(transaction.end(now: Self.t0)) == ["store(new)", "deliver(new)", "finish"])
    }

    @Test("streaming: chunks go to the caller as they arrive and to a store writer, never held; committed at the end")
    func streaming() {
        var transaction = Self.transaction(role: .foreground(streaming: true))
        _ = transaction.start(entry: nil, now: Self.t0)
        #expect(Self.names(transaction.head(Self.head(200), now: Self.t0)) == ["served(miss)", "respond(200, miss, stored)", "openWriter"])
        #expect(Self.names(transaction.body(Data("a".utf8))) == ["deliver(a)", "append(a)"])
        #expect(Self.names(transaction.body(Data("b".utf8))) == ["deliver(b)", "append(b)"])
        #expect(Self.names(transaction.end(now: Self.t0)) == ["commit(1 entry, 2)", "finish"])
    }

    @Test("streaming to the store: cancelled, failed, or declined by the cacher, what was written is discarded; a cacher that reads bodies gets them held")
    func streamingEndings() {
        func receiving(_ configuration: CacheConfiguration = CacheConfiguration(windows: .test(fresh: 60, usable: 3600))) -> CacheTransaction {
            var transaction = Self.transaction(role: .foreground(streaming: true), configuration: configuration)
            _ = transaction.start(entry: nil, now: Self.t0)
            _ = transaction.head(Self.head(200), now: Self.t0)
            _ = transaction.body(Data("a".utf8))
            return transaction
        }
        var cancelled = receiving()
        #expect(Self.names(cancelled.cancel()) == ["cancelForward", "discardWriter"])
        var failed = receiving()
        #expect(Self.names(failed.fail(Self.networkError, now: Self.t0)).prefix(1) == ["discardWriter"])
        var declined = receiving(CacheConfiguration(windows: .test(fresh: 60, usable: 3600), responseCacher: .doNotCache))
        #expect(Self.names(declined.end(now: Self.t0)) == ["notStored(\(NotStoredReason.declinedByCacher))", "discardWriter", "finish"])
        var reading = Self.transaction(role: .foreground(streaming: true),
                                       configuration: CacheConfiguration(responseCacher: .modify { _, entry in entry }))
        _ = reading.start(entry: nil, now: Self.t0)
        #expect(!Self.names(reading.head(Self.head(200), now: Self.t0)).contains("openWriter"))
        #expect(Self.names(reading.body(Data("a".utf8))) == ["deliver(a)"])
        #expect(Self.names(reading.end(now: Self.t0)) == ["store(a)", "finish"])
    }

    @Test("too large: announced by Content-Length, not stored from the head; growing past the limit, dropped mid-body")
    func tooLarge() {
        var announced = Self.transaction(role: .foreground(streaming: true), maxEntrySize: 10)
        _ = announced.start(entry: nil, now: Self.t0)
        #expect(Self.names(announced.head(Self.head(200, ["Content-Length": "50"]), now: Self.t0))
                == ["notStored(\(NotStoredReason.tooLarge(bytes: 50, limit: 10)))", "served(bypass)", "respond(200, bypass)"])
        var huge = Self.transaction(role: .foreground(streaming: true), maxEntrySize: 3 << 30) // lengths past 2^31 are exact
        _ = huge.start(entry: nil, now: Self.t0)
        #expect(Self.names(huge.head(Self.head(200, ["Content-Length": "5000000000"]), now: Self.t0)).first == "notStored(\(NotStoredReason.tooLarge(bytes: 5_000_000_000, limit: 3 << 30)))")
        var growing = Self.transaction(role: .foreground(streaming: true), maxEntrySize: 10)
        _ = growing.start(entry: nil, now: Self.t0)
        _ = growing.head(Self.head(200), now: Self.t0)
        #expect(Self.names(growing.body(Data("123456".utf8))) == ["deliver(123456)", "append(123456)"])
        #expect(Self.names(growing.body(Data("789012".utf8)))
                == ["deliver(789012)", "notStored(\(NotStoredReason.tooLarge(bytes: 12, limit: 10)))", "discardWriter"])
        #expect(Self.names(growing.end(now: Self.t0)) == ["finish"], "nothing stored, nothing held")
    }

    @Test("an answer that may not be stored supersedes the entry it replaces; a 4xx or 5xx does not")
    func notStorable() {
        var noStore = Self.transaction()
        _ = noStore.start(entry: Self.entry(age: 100_000), now: Self.t0)
        #expect(Self.names(noStore.head(Self.head(200, ["Cache-Control": "no-store"]), now: Self.t0))
                == ["remove", "notStored(\(NotStoredReason.responseNoStore))", "served(bypass)", "respond(200, bypass)"])
        var forbidden = Self.transaction()
        _ = forbidden.start(entry: Self.entry(age: 100_000), now: Self.t0)
        #expect(Self.names(forbidden.head(Self.head(403), now: Self.t0))
                == ["notStored(\(NotStoredReason.status(403)))", "served(bypass)", "respond(403, bypass)"])
    }

    @Test("a 5xx: the entry served as a fallback where allowed, the forwarded request cancelled")
    func serverErrorFallback() {
        var transaction = Self.transaction()
        _ = transaction.start(entry: Self.entry(headers: [:], age: 4000), now: Self.t0)
        #expect(Self.names(transaction.head(Self.head(503), now: Self.t0)) == ["cancelForward", "served(fallback)", "serve(old, fallback)"])
        #expect(transaction.isDone)
        #expect(transaction.end(now: Self.t0).isEmpty, "later inputs are ignored")
    }

    @Test("a network error: fallback where allowed, else the error; a cancellation reports nothing")
    func networkErrors() {
        var fallback = Self.transaction()
        _ = fallback.start(entry: Self.entry(headers: [:], age: 4000), now: Self.t0)
        #expect(Self.names(fallback.fail(Self.networkError, now: Self.t0)) == ["cancelForward", "served(fallback)", "serve(old, fallback)"])
        var none = Self.transaction()
        _ = none.start(entry: nil, now: Self.t0)
        let failed = none.fail(Self.networkError, now: Self.t0)
        #expect(failed == [.emit(.served(.miss)), .fail(Self.networkError)])
        var cancelled = Self.transaction()
        _ = cancelled.start(entry: nil, now: Self.t0)
        #expect(cancelled.fail(TransactionError(URLError(.cancelled)), now: Self.t0).isEmpty)
        var midBody = Self.transaction()
        _ = midBody.start(entry: nil, now: Self.t0)
        _ = midBody.head(Self.head(200), now: Self.t0)
        #expect(midBody.fail(Self.networkError, now: Self.t0) == [.fail(Self.networkError)], "after the head: the error, nothing stored")
    }

    @Test("the caller cancels: the forwarded request is cancelled and nothing more happens")
    func cancel() {
        var transaction = Self.transaction()
        _ = transaction.start(entry: nil, now: Self.t0)
        #expect(transaction.cancel() == [.cancelForward])
        #expect(transaction.head(Self.head(200), now: Self.t0).isEmpty)
        #expect(transaction.end(now: Self.t0).isEmpty)
    }

    // MARK: - 304 and 206

    @Test("RFC 9111 section 4.3.4: a 304 that selects the entry updates and serves it; one that does not is asked again unconditionally, once")
    func notModified() {
        var selecting = Self.transaction()
        _ = selecting.start(entry: Self.entry(age: 4000), now: Self.t0)
        let revalidated = selecting.head(Self.head(304, ["ETag": "\"v1\"", "Cache-Control": "max-age=9"]), now: Self.t0)
        #expect(Self.names(revalidated) == ["store(old)", "served(revalidated)", "serve(old, revalidated)"])
        if case .store(let merged) = revalidated.first {
            #expect(merged.header("Cache-Control") == "max-age=9" && merged.storedAt == Self.t0)
        }
        var other = Self.transaction()
        _ = other.start(entry: Self.entry(age: 4000), now: Self.t0)
        #expect(Self.names(other.head(Self.head(304, ["ETag": "\"v2\""]), now: Self.t0)) == ["cancelForward", "forward"])
        #expect(Self.names(other.head(Self.head(304, ["ETag": "\"v2\""]), now: Self.t0)) == ["cancelForward", "served(fallback)", "serve(old, fallback)"],
                "a 304 to the unconditional retry is a bad answer: the entry is a fallback, never updated")
    }

    @Test("a 304 that adds a Vary: the updated entry names this request's value for it, so it answers the next such request")
    func notModifiedAddsVary() {
        var request = URLRequest(url: Self.url)
        request.setValue("a", forHTTPHeaderField: "X-V")
        var transaction = Self.transaction(request)
        _ = transaction.start(entry: Self.entry(age: 4000), now: Self.t0)
        let revalidated = transaction.head(Self.head(304, ["ETag": "\"v1\"", "Vary": "X-V"]), now: Self.t0)
        #expect(Self.names(revalidated) == ["store(old, variant)", "store(old)", "served(revalidated)", "serve(old, revalidated)"])
        for case .store(let stored) in revalidated {
            #expect(Vary.matches(stored, RequestHeaders(request)), "\(stored.key)")
        }
    }

    @Test("a 304 or 206 the cache did not ask for is a bad answer: fallback where allowed, else passed through unstored (to the cache's own conditional, an error), never a removal")
    func unexpectedAnswers() {
        for status in [304, 206] {
            var withFallback = Self.transaction()
            _ = withFallback.start(entry: Self.entry(headers: [:], age: 4000), now: Self.t0)
            #expect(Self.names(withFallback.head(Self.head(status), now: Self.t0)) == ["cancelForward", "served(fallback)", "serve(old, fallback)"])
            var without = Self.transaction()
            _ = without.start(entry: nil, now: Self.t0)
            #expect(Self.names(without.head(Self.head(status), now: Self.t0)) == ["served(bypass)", "respond(\(status), bypass)"])
            var detached = Self.transaction()
            _ = detached.start(entry: nil, now: Self.t0)
            _ = detached.detach()
            #expect(detached.head(Self.head(status), now: Self.t0) == [.cancelForward] && detached.isDone, "nobody to deliver to")
        }
        // A 206 to the cache's own conditional request, with no fallback: an error (the caller never sent that request).
        var conditional = Self.transaction(configuration: CacheConfiguration(windows: .test(fresh: 60, usable: 3600), errorFallbackWindow: nil))
        #expect(Self.names(conditional.start(entry: Self.entry(age: 4000), now: Self.t0)) == ["forward(conditional)"])
        #expect(conditional.head(Self.head(206), now: Self.t0) == [.cancelForward, .emit(.served(.expired)), .fail(.badResponse(status: 206))])
        var request = URLRequest(url: Self.url)
        request.setValue("\"v1\"", forHTTPHeaderField: "If-Match")
        var callers = Self.transaction(request)
        _ = callers.start(entry: Self.entry(), now: Self.t0)
        #expect(Self.names(callers.head(Self.head(304), now: Self.t0)) == ["served(bypass)", "respond(304, bypass)"],
                "the caller's own conditional request gets its 304 untouched")
    }

    // MARK: - Unsafe methods

    @Test("RFC 9111 section 4.4: an unsafe method's non-error answer invalidates its URL and same-origin Location and Content-Location")
    func invalidation() {
        var request = URLRequest(url: Self.url)
        request.httpMethod = "POST"
        var ok = Self.transaction(request)
        #expect(Self.names(ok.start(entry: nil, now: Self.t0)) == ["forward"])
        let headers = ["Location": "/created", "Content-Location": "http://example.test/cl", "X": "y"]
        #expect(Self.names(ok.head(Self.head(201, headers), now: Self.t0)) == ["invalidate(/t,/created,/cl)", "served(bypass)", "respond(201, bypass)"])
        var foreign = Self.transaction(request)
        _ = foreign.start(entry: nil, now: Self.t0)
        #expect(Self.names(foreign.head(Self.head(303, ["Location": "http://other.test/x"]), now: Self.t0)).first == "invalidate(/t)")
        for status in [400, 404, 500] {
            var error = Self.transaction(request)
            _ = error.start(entry: nil, now: Self.t0)
            #expect(!Self.names(error.head(Self.head(status), now: Self.t0)).contains { $0.hasPrefix("invalidate") }, "status \(status)")
        }
    }

    // MARK: - Vary, the response cacher, collapsing

    @Test("a response with Vary is stored under its variant and under its URL")
    func varyStored() {
        var request = URLRequest(url: Self.url)
        request.setValue("fr", forHTTPHeaderField: "Accept-Language")
        var transaction = Self.transaction(request)
        _ = transaction.start(entry: nil, now: Self.t0)
        _ = transaction.head(Self.head(200, ["Vary": "Accept-Language"]), now: Self.t0)
        _ = transaction.body(Data("bonjour".utf8))
        let end = transaction.end(now: Self.t0)
        #expect(Self.names(end) == ["store(bonjour, variant)", "store(bonjour)", "deliver(bonjour)", "finish"])
        if case .store(let entry) = end.first { #expect(entry.varyValues == ["accept-language": "fr"]) }
    }

    @Test("the response cacher may decline or change what is stored; usefulUntil is set from the windows")
    func cacher() {
        let declining = CacheConfiguration(responseCacher: .doNotCache)
        var declined = Self.transaction(configuration: declining)
        _ = declined.start(entry: nil, now: Self.t0)
        _ = declined.head(Self.head(200), now: Self.t0)
        #expect(Self.names(declined.end(now: Self.t0)) == ["notStored(\(NotStoredReason.declinedByCacher))", "finish"])
        var kept = Self.transaction(configuration: CacheConfiguration(windows: .test(fresh: 10, usable: 100), errorFallbackWindow: 50))
        _ = kept.start(entry: nil, now: Self.t0)
        _ = kept.head(Self.head(200), now: Self.t0)
        if case .store(let entry)? = kept.end(now: Self.t0).first {
            #expect(entry.usefulUntil == Self.t0.addingTimeInterval(100), "no validator: of use until the usable window ends")
        } else {
            Issue.record("nothing stored")
        }
    }

    @Test("a request that waited for another one's answer: served from it when its Vary matches, else it goes out itself")
    func collapsed() {
        var follower = Self.transaction()
        _ = follower.start(entry: nil, now: Self.t0)
        let served = follower.collapsed(into: Self.entry(body: "shared"))
        #expect(Self.names(served) == ["served(miss)", "collapsed", "serve(shared, miss)"])
        if case .serve(_, _, let disposition)? = served.last { #expect(disposition.collapsed && disposition.stored) }
        var alone = Self.transaction()
        _ = alone.start(entry: nil, now: Self.t0)
        #expect(Self.names(alone.collapsed(into: nil)) == ["forward"])
        var mismatch = Self.transaction()
        _ = mismatch.start(entry: nil, now: Self.t0)
        var variant = Self.entry(headers: ["Vary": "Accept-Language"], body: "fr")
        variant.varyValues = ["accept-language": "fr"]
        #expect(Self.names(mismatch.collapsed(into: variant)) == ["forward"])
    }

    // MARK: - Background refreshes

    @Test("a refresh: conditional when it can be; 304, 200, 5xx, error and an unstorable answer each end it with one event and never remove the entry")
    func refresh() {
        let previous = Self.entry(age: 100)
        func refresh() -> CacheTransaction {
            var transaction = Self.transaction(role: .refresh(previous: previous))
            #expect(Self.names(transaction.start(entry: previous, now: Self.t0)) == ["forward(conditional)"])
            return transaction
        }
        var unchanged = refresh()
        #expect(Self.names(unchanged.head(Self.head(304, ["ETag": "\"v1\""]), now: Self.t0)) == ["store(old)", "finish", "refreshed(false)"])
        var changed = refresh()
        #expect(Self.names(changed.head(Self.head(200), now: Self.t0)) == ["openWriter"], "a refresh answers nobody")
        #expect(Self.names(changed.body(Data("new".utf8))) == ["append(new)"])
        #expect(Self.names(changed.end(now: Self.t0)) == ["commit(1 entry, 3)", "finish", "refreshed(true)"])
        var same = refresh()
        _ = same.head(Self.head(200), now: Self.t0)
        _ = same.body(previous.body)
        #expect(Self.names(same.end(now: Self.t0)).last == "refreshed(false)", "the written body's checksum tells it is the same")
        var failing = refresh()
        #expect(Self.names(failing.head(Self.head(500), now: Self.t0)) == ["cancelForward", "finish", "refreshFailed"])
        var erroring = refresh()
        #expect(Self.names(erroring.fail(Self.networkError, now: Self.t0)) == ["finish", "refreshFailed"])
        var unstorable = refresh()
        _ = unstorable.head(Self.head(200, ["Cache-Control": "no-store"]), now: Self.t0)
        #expect(Self.names(unstorable.end(now: Self.t0)) == ["finish", "refreshFailed"])
    }
}
