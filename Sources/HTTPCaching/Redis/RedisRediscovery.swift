/// When a router may learn again where its commands go (a cluster's slot map, the primary a
/// sentinel names), and why calls fail at once while it knows nowhere to send them.
///
/// Part of a router's locked state: every method is called under the router's lock, with the
/// time read there (`DispatchTime.now().uptimeNanoseconds`).
struct RedisRediscovery {
    /// Whether a caller is learning now (the others do not ask too).
    private var running = false
    /// When the last learning began, or was answered when told so (`learned(now:)`).
    private var last: UInt64 = 0
    /// Why the last learning failed and until when calls fail at once for it, while nothing is
    /// known.
    private var failure: (error: RedisClientError, until: UInt64)?

    /// Starts learning again, unless a caller is already, or (unless `urgent`) the last began
    /// or succeeded less than `interval` nanoseconds ago. End it with `end()`.
    mutating func begin(now: UInt64, interval: UInt64, urgent: Bool = false) -> Bool {
        guard urgent ? !running : isDue(now: now, interval: interval) else { return false }
        running = true
        last = now
        return true
    }

    /// The learning `begin` started is over, whatever it found.
    mutating func end() {
        running = false
    }

    /// Whether nobody is learning and the last time is `interval` nanoseconds old or more.
    func isDue(now: UInt64, interval: UInt64) -> Bool {
        !running && now &- last >= interval
    }

    /// Something was learned at `now`: calls no longer fail for an earlier failure.
    mutating func learned(now: UInt64? = nil) {
        if let now { last = now }
        failure = nil
    }

    /// Learning failed: while `knowsNothing`, calls fail at once with `error` until `until`.
    mutating func failed(_ error: RedisClientError, until: UInt64, knowsNothing: Bool) {
        failure = knowsNothing ? (error, until) : nil
    }

    /// The error calls fail with at once at `now`, if any.
    func failing(now: UInt64) -> RedisClientError? {
        failure.flatMap { now < $0.until ? $0.error : nil }
    }
}
