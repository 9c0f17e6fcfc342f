import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Sends the hop's request, unless another request for the key is in flight and its
    /// answer may be stored: then this one waits for it (collapsing).
    func forward(conditional: [String: String], hop: Hop) {
        let (plan, flight) = state.withLock { ($0.transaction?.pendingPlan, $0.flight) }
        // A retry of a request already leading its key's flight goes out again as the leader.
        if caller != nil, flight != .leading(hop.key), let plan, plan.store, !plan.passThrough {
            // Stopped between joining and noting it here (`stop` could not know of the flight):
            // a follower leaves at once; a leader ends its flight, and those waiting go out.
            switch cache.flights.join(hop.key, self) {
            case .follower:
                // Should it go out after all, it goes through the forwarding session, whose request
                // its wait's timeout may cancel from any thread (`timeOutWaiting`). Ended meanwhile
                // (that timeout, for a request sent again that joined as a follower), it leaves.
                let number = state.withLock { state -> Int? in
                    state.flight = .waiting(hop.key)
                    state.sentBefore = true
                    return state.answering ? state.hopNumber : nil
                }
                guard let number else {
                    state.withLock { $0.flight = nil }
                    return cache.flights.leave(hop.key, self)
                }
                return timeOutWaiting(for: hop, hopNumber: number)
            case .leader:
                guard state.withLock({ $0.flight = .leading(hop.key); return $0.answering }) else { return endFlightAndClaim() }
            }
        }
        if case .fromDelegate = hop.body { return askDelegateForBody(then: conditional, hop: hop) }
        if claimsSharedFill(plan, conditional: conditional) { return claimSharedFill(then: conditional, hop: hop) }
        send(conditional: conditional, hop: hop)
    }

    /// A request waiting on another's answer times out as its own would: nothing arrives for
    /// it within its timeout (the request's own, else the session's: Foundation's idle timeout),
    /// so it stops waiting and fails as timed out (or is answered as a timeout allows). So does
    /// one sent after the wait (the other's answer was not stored) that has no head yet when
    /// the timeout comes: its request is cancelled, rather than given a whole timeout more.
    private func timeOutWaiting(for hop: Hop, hopNumber number: Int) {
        let seconds = RequestTimeout.isSet(hop.request) ? hop.request.timeoutInterval
            : binding.forwarding.configuration.timeoutIntervalForRequest
        // Whole seconds, as Foundation's HTTP class counts them (`Int(timeout) * 1000` ms).
        cache.deadlines.after(Double(Int(min(seconds, 1e9))), on: binding.control) { [weak self] in
            guard let self else { return }
            let now = cache.now()
            let (actions, waiting) = state.withLock { state -> ([CacheTransaction.Action]?, Bool) in
                let waiting = state.flight == .waiting(hop.key)
                guard !state.stopped, state.hopNumber == number,
                      waiting || (state.resentAfterWaiting && state.transaction?.pendingPlan != nil) else {
                    return (nil, false)
                }
                if waiting { state.flight = nil }
                let failed = state.transaction?.fail(TransactionError(URLError(.timedOut)), now: now) ?? []
                return (waiting ? failed : [.cancelForward] + failed, waiting)
            }
            guard let actions else { return }
            if waiting { cache.flights.leave(hop.key, self) }
            run(actions)
        }
    }

    func send(conditional: [String: String], hop: Hop) {
        if let caller, sendsDirectly(conditional: conditional, hop: hop, caller) { return }
        sendForwarded(conditional: conditional, hop: hop)
    }

    /// Sends the exchange's first request by Foundation's own class on the caller's task
    /// (`DirectForward`) when it may go that way, on the task's work queue; false when it goes
    /// through the forwarding session.
    private func sendsDirectly(conditional: [String: String], hop: Hop, _ caller: Caller) -> Bool {
        guard let task = caller.facts?.task as? URLSessionDataTask, !state.withLock({ $0.sentBefore }),
              DirectForward.applies(to: hop, task: task, conditional: conditional), !cache.redirects(hop.key) else { return false }
        if caller.delivery.isInline { return sendDirectly(task, caller) }
        guard let queue = TaskIntrospection.workQueue(of: task) else { return false }
        queue.async {
            if !self.sendDirectly(task, caller) { self.sendForwarded(conditional: conditional, hop: hop) }
        }
        return true
    }

    /// On the task's work queue: sends the request by Foundation's own class if the task is
    /// running and takes its answer whole with no delegate to ask (`TaskFacts.sendsAlone`).
    private func sendDirectly(_ task: URLSessionDataTask, _ caller: Caller) -> Bool {
        prepareForNetwork(caller)
        // Foundation's class adds the session's own fields: only those the keys were made with.
        guard let facts = caller.facts, facts.sendsAlone, let session = facts.session, binding.keysHeaders(of: session),
              task.state == .running, let direct = DirectForward(task: task, observer: self) else { return false }
        let now = cache.now()
        let go = state.withLock { state -> Bool in
            guard state.answering, !state.sentBefore else { return false }
            state.forwarded = (direct.id, nil)
            state.direct = direct
            state.sentBefore = true
            state.transaction?.sent(at: now)
            return true
        }
        if go {
            binding.count(originRequests: 1)
            direct.start()
        }
        return true
    }

    private func sendForwarded(conditional: [String: String], hop: Hop) {
        state.withLock { $0.sentBefore = true }
        let sending = UncheckedBox((hop.request, hop.body.forwarded(inRequest: hop.request.httpBody != nil)))
        // Never create or resume a task synchronously on Foundation's shared URLSession queue,
        // where `startLoading` runs: every session's work queue targets it, so creating a task
        // there waits on the queue the thread already holds, and traps. The request is made
        // here too, while that queue is still held by the rest of `startLoading`.
        binding.control.async {
            let request = Hop.forwardingRequest(from: sending.value.0, conditional: conditional)
            // A caller that takes the answer whole gets it whole from the network too (known
            // once the work queue has read it, overlapping this block's start).
            self.preparing.wait()
            let whole = self.caller != nil && self.state.withLock { $0.callerTakes?.streaming == false }
            let task = self.binding.forwarding.makeTask(request, body: sending.value.1, whole: whole, observer: self)
            // Its answer reaches the caller through blocks on the queue its own transfer runs on.
            self.caller?.delivery.follow(self.binding.forwarding.transferQueue ?? TaskIntrospection.workQueue(of: task))
            let now = self.cache.now()
            let go = self.state.withLock { state -> Bool in
                guard !(state.transaction?.isDone ?? true) else { return false }
                state.forwarded = (task.taskIdentifier, UncheckedBox(task))
                state.transaction?.sent(at: now)
                return true
            }
            if go {
                self.binding.count(originRequests: 1)
                task.resume()
            } else {
                task.cancel()
            }
        }
    }

    /// `uploadTask(withStreamedRequest:)`: the caller's delegate supplies the body stream.
    private func askDelegateForBody(then conditional: [String: String], hop: Hop) {
        guard let (session, delegate, task) = caller?.askable() else {
            var hop = hop
            hop.body = .none
            return send(conditional: conditional, hop: hop)
        }
        let box = UncheckedBox((session, delegate, task))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2) { stream in
                let updated = self.state.withLock { state -> Hop in
                    state.hop.body = stream.map(HopBody.delegateStream) ?? .none
                    return state.hop
                }
                self.send(conditional: conditional, hop: updated)
            }
        }
    }

    // MARK: - What the forwarded request reports (ForwardObserver)

    /// Asks the caller's delegate for the body stream again, where Foundation asks it: on the
    /// thread that asks (Foundation waits there, up to 7 s, for the answer). None for a caller
    /// gone, a request no longer forwarded, or without a delegate to ask (the spent stream goes
    /// on, as without the cache). The delegate was read before the request went out.
    func forwardNeedsNewBodyStream(_ task: Int, answer: @escaping @Sendable (InputStream?) -> Void) {
        let (current, body) = state.withLock { (!$0.stopped && $0.forwarded?.id == task, $0.hop.body) }
        // A stream read to key it goes again from the bytes it was keyed by, whatever the
        // delegate gives (which it is still asked for, as without the cache): its answer is
        // stored under their digest.
        var resend = answer
        if case .readStream(let bytes) = body { resend = { _ in answer(InputStream(data: bytes)) } }
        guard current, let facts = caller?.facts, let session = facts.session, let delegate = facts.delegateIfRead else {
            return resend(nil)
        }
        delegate.urlSession(session, task: facts.task, needNewBodyStream: resend)
    }

    func forwardReceived(_ response: HTTPURLResponse, from task: Int) {
        // The forwarding session stored its cookies in the installation's storage; the caller's
        // session may keep its own (a class installed by hand), where Foundation would put them.
        let jar = cookieJar
        if !jar.sharesStorage(with: binding.forwarding.cookieJar) { jar.store(from: response) }
        let now = cache.now()
        run(input(from: task) { $0.head(ResponseHead(response), now: now) })
    }

    /// The cookie settings of the caller's session, else the installation's.
    var cookieJar: CookieJar {
        caller?.facts?.session.map { CookieJar($0.configuration) } ?? binding.forwarding.cookieJar
    }

    func forwardReceived(_ data: Data, from task: Int) {
        binding.count(fetchedFromOrigin: data.count)
        run(input(from: task) { $0.body(data) })
    }

    func forwardCompleted(_ task: Int, error: (any Error)?) {
        let now = cache.now()
        run(input(from: task) { transaction in
            if let error { return transaction.fail(TransactionError(error), now: now) }
            return transaction.end(now: now)
        })
    }

    func forwardHold() -> (@Sendable (_ runningOn: DispatchQueue?) -> Void)? {
        guard let delivery = caller?.delivery else { return nil }
        delivery.hold()
        return { delivery.release(runningOn: $0) }
    }

    func forwardSentBody(_ task: Int, sent: Int64, total: Int64, expected: Int64) {
        guard let facts = caller?.facts, let session = facts.session, let delegate = facts.progressDelegate(onWorkQueue: false),
              state.withLock({ $0.forwarded?.id == task }) else { return }
        let box = UncheckedBox((session, delegate, facts.task))
        session.delegateQueue.addOperation {
            box.value.1.urlSession(box.value.0, task: box.value.2, didSendBodyData: sent, totalBytesSent: total,
                                   totalBytesExpectedToSend: expected)
        }
    }

    /// Feeds an input from the forwarded task `task`; none if that task is no longer current.
    /// Also the direct request's (`DirectObserver`), under its id. Once the request sent after a
    /// wait answers, the wait's timeout no longer covers it: a retry it leads to (a 304 that
    /// selects nothing) has a timeout of its own.
    private func input(from task: Int, _ body: (inout CacheTransaction) -> [CacheTransaction.Action]) -> [CacheTransaction.Action] {
        state.withLock { state in
            guard state.forwarded?.id == task, state.transaction != nil else { return [] }
            state.resentAfterWaiting = false
            return body(&state.transaction!)
        }
    }
}

extension Exchange: DirectObserver {
    func reportDirectly(_ report: () -> Void) {
        guard let caller else { return report() }
        caller.delivery.inline(report)
    }

    /// The head of the answer Foundation's own class got. Its cookies are stored already (the
    /// class stores them as without the cache). From another URL than the request's, it followed
    /// a redirect: the answer is not stored, and the key's next miss is forwarded.
    func directReceived(_ response: HTTPURLResponse, id: Int) {
        let now = cache.now()
        let (hop, direct) = state.withLock { ($0.hop, $0.direct) }
        let redirected = direct?.followedRedirects ?? true
        guard !redirected, response.url?.absoluteString == hop.request.url?.absoluteString else {
            cache.noteRedirects(hop.key)
            return run(input(from: id) { $0.answeredFromElsewhere(ResponseHead(response)) })
        }
        run(input(from: id) { $0.head(ResponseHead(response), now: now) })
    }
}
