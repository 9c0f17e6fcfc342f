import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One origin request per key across the processes that share a store (a disk directory, a
/// Redis server): a miss claims the key's fill in the store before it asks the origin; a miss
/// in another process that finds the claim taken waits for the entry (a bounded poll of the
/// store), and goes to the origin itself when the claim is gone with nothing stored (the answer
/// was not storable, its holder failed) or the lease runs out. Within a process, the key's
/// flight already collapses misses: only its leader claims or waits.
extension Exchange {
    /// Whether this miss should claim its key's fill before asking the origin.
    func claimsSharedFill(_ plan: ForwardPlan?, conditional: [String: String]) -> Bool {
        // Only where the store was read and had nothing: a store that cannot be read is not waited on.
        guard caller != nil, let plan, plan.store, !plan.passThrough, [.uriMiss, .varyMiss].contains(plan.reason), conditional.isEmpty,
              cache.configuration.sharedFillLease != nil, !cache.store.answersFromMemory else { return false }
        return state.withLock { !$0.sharedFillChecked }
    }

    /// Claims the key's fill on the I/O queue, then sends the request, or waits for the entry
    /// another process is fetching.
    func claimSharedFill(then conditional: [String: String], hop: Hop) {
        state.withLock { $0.sharedFillChecked = true }
        let lease = cache.configuration.sharedFillLease ?? 0
        let started = Date()
        cache.ioQueue(for: hop.key.url).async {
            self.pollSharedFill(hop: hop, lease: lease, started: started, interval: 0.002)
        }
    }

    /// One try: a claim won sends the request, unless the answer was stored meanwhile; else
    /// the request waits, looking at the store again a little later (2 ms, growing to 50 ms)
    /// until the lease has run out. A store that can no longer be read is not waited on. (The
    /// first try claims at once: the lookup just before found nothing. A claim won just after
    /// another process stored the answer and gave its claim back would send a second request
    /// then: a window of one store read.)
    private func pollSharedFill(hop: Hop, lease: TimeInterval, started: Date, interval: TimeInterval) {
        // Stopped, or ended otherwise (its waiting timeout): it neither waits nor claims.
        guard state.withLock({ $0.answering }) else { return endFlightAndClaim() }
        let first = interval == 0.002
        var readable: Bool? = false
        if !first {
            let found = cache.lookup(hop.key, headers: hop.headers)
            if let entry = found.entry { return sharedFillArrived(entry) }
            readable = found.otherVariant
        }
        let claim = hop.key.sharedFillClaim
        let outcome = readable == nil ? nil : cache.store.claimOutcome(of: claim, lease: lease)
        // A claim the store could not record is not waited on either: the origin, at once.
        if outcome == .failed { return send(conditional: [:], hop: hop) }
        if outcome == .won {
            // Ended since the look above (its end gave back no claim yet): the claim goes back now.
            guard state.withLock({ $0.sharedFillClaim = claim; return $0.answering }) else { return endFlightAndClaim() }
            // Its holder may have stored the answer and let go since the look above.
            if !first, let entry = cache.lookup(hop.key, headers: hop.headers).entry {
                endSharedFillClaim() // nothing to fetch: others may look again at once
                return sharedFillArrived(entry)
            }
            return send(conditional: [:], hop: hop)
        }
        if first { run([.emit(.waitingForSharedFill)]) }
        guard readable != nil, Date().timeIntervalSince(started) < lease else { return send(conditional: [:], hop: hop) }
        cache.deadlines.after(interval, on: cache.ioQueue(for: hop.key.url)) {
            self.pollSharedFill(hop: hop, lease: lease, started: started, interval: min(interval * 1.5, 0.05))
        }
    }

    /// Another process stored the key's answer: it answers this request and those waiting on
    /// it here, as a collapsed request's would.
    private func sharedFillArrived(_ entry: CacheEntry) {
        let actions = state.withLock { state -> [CacheTransaction.Action] in
            guard !state.stopped else { return [] }
            state.stored = .entry(entry)
            return state.transaction?.collapsed(into: entry) ?? []
        }
        run(actions)
    }

    /// Gives the fill claim back (after the answer was stored, or not), once.
    func endSharedFillClaim() {
        guard let claim = state.withLock({ state -> CacheKey? in
            defer { state.sharedFillClaim = nil }
            return state.sharedFillClaim
        }) else { return }
        cache.ioQueue(for: claim.url).async { [cache] in cache.store.releaseRefresh(of: claim) }
    }
}

extension CacheKey {
    /// The claim a miss for this key takes in the store while it fetches the key for every
    /// process sharing the store: the key with a variant no `Vary` makes.
    var sharedFillClaim: CacheKey {
        var claim = primary
        claim.variant = "\u{0}fill"
        return claim
    }
}
