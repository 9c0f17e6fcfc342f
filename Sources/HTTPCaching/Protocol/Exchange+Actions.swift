import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Performs one of the transaction's actions: each goes to the caller, the store, or the
    /// network, and nowhere else.
    func perform(_ action: CacheTransaction.Action) {
        let hop = state.withLock { $0.hop }
        switch action {
        case .emit(let kind):
            cache.emit(kind, hop.key, hop.request.url)
            if kind.isAboutRequests { binding.statistics.count(kind) }
        case .serve(let entry, let form, let disposition):
            endFlight()
            serve(entry, form: form, disposition: disposition)
        case .forward(let conditional):
            forward(conditional: conditional, hop: hop)
        case .cancelForward:
            cancelForward()
        case .respond(let head, let disposition):
            respond(head, disposition: disposition, hop: hop)
        case .deliver(let data):
            caller?.load(data)
        case .finish:
            endFlight()
            endClaim()
            finish()
        case .fail(let error):
            endFlight()
            endClaim()
            caller?.delivery.fail(error.error)
        case .openWriter(let key):
            let writer = cache.openWriter(for: key, url: hop.request.url)
            state.withLock { $0.writer = writer }
        case .appendToWriter(let bytes):
            guard let writer = state.withLock({ $0.writer }) else { return }
            if !cache.append(bytes, to: writer.value, key: hop.key, url: hop.request.url) { state.withLock { $0.writer = nil } }
        case .commitWriter(let entries, let bodyBytes, let inMemoryOnly):
            guard let writer = takeWriter(), let last = entries.last else { return }
            noteStored(last, cache.commit(writer.value, entries, bodyBytes: bodyBytes, inMemoryOnly: inMemoryOnly), bodyInStore: true)
        case .discardWriter:
            takeWriter()?.value.abort()
        case .store(let entry):
            noteStored(entry, cache.write(entry))
        case .storeInMemory(let entry):
            noteStored(entry, cache.writeInMemory(entry))
        case .askToStore(let entry):
            askToStore(entry)
        case .remove(let key):
            cache.remove(key, url: hop.request.url)
        case .invalidate(let urls):
            invalidate(urls, from: hop.request)
        case .refresh(let entry):
            BackgroundRefresh.start(entry, hop: hop, binding: binding)
        }
    }

    private func takeWriter() -> UncheckedBox<any ResponseStoreWriter>? {
        state.withLock { state in
            defer { state.writer = nil }
            return state.writer
        }
    }

    private func noteStored(_ entry: CacheEntry, _ written: Bool, bodyInStore: Bool = false) {
        guard written else { return }
        state.withLock { state in
            guard state.stored == nil || entry.key.variant == nil else { return }
            state.stored = bodyInStore ? .bodyInStore : .entry(entry)
        }
    }

    private func cancelForward() {
        let (task, direct, done) = state.withLock { state -> (UncheckedBox<URLSessionDataTask>?, DirectForward?, Bool) in
            defer { state.forwarded = nil }
            return (state.forwarded?.task, state.forwardedDirectly, state.transaction?.isDone ?? true)
        }
        if let task { binding.control.async { task.value.cancel() } }
        direct?.ignore() // stopped in `stop()`, on the task's work queue, if the caller cancelled
        // A retry cancels one request and sends another: the flight and the claim go on.
        if done {
            endFlight()
            endClaim()
        }
    }

    /// Removes the stored GETs of `urls`, keyed with the credentials of `request`.
    private func invalidate(_ urls: [URL], from request: URLRequest) {
        for url in urls {
            var get = request
            get.url = url
            get.httpMethod = "GET"
            guard let key = try? binding.key(for: get) else { continue }
            cache.invalidate(key, headers: binding.keys.headers(get), url: url)
        }
    }

    /// Ends the flight this exchange leads and gives its refresh claim back (each once).
    func endFlightAndClaim() {
        endFlight()
        endClaim()
    }

    /// Gives the refresh claim and the fill claim back, once.
    private func endClaim() {
        endSharedFillClaim()
        guard let key = state.withLock({ state -> CacheKey? in
            defer { state.claim = nil }
            return state.claim
        }) else { return }
        cache.endRefresh(key)
        cache.ioQueue(for: key.url).async { [cache] in cache.store.releaseRefresh(of: key) }
    }

    /// Ends the flight this exchange leads: those waiting get what it stored.
    private func endFlight() {
        let (flight, stored) = state.withLock { state -> (Flight?, Stored?) in
            guard case .leading = state.flight else { return (nil, nil) }
            defer { state.flight = nil }
            return (state.flight, state.stored)
        }
        guard case .leading(let key) = flight else { return }
        switch stored {
        case .entry(let entry)?: cache.flights.end(key, entry: entry)
        case .bodyInStore?: cache.flights.end(key, entry: nil, readStore: true)
        case nil: cache.flights.end(key, entry: nil)
        }
    }
}

extension CacheEvent.Kind {
    /// Whether the kind is about one installation's requests (how they were answered, their
    /// refreshes), not about the store the installations share.
    var isAboutRequests: Bool {
        switch value {
        case .served, .collapsed, .refreshed, .refreshFailed: true
        default: false
        }
    }
}
