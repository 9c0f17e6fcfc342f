import Testing
@testable import HTTPCaching

/// The gate both Redis routers learn again through: one caller at a time, at most once per
/// interval unless urgent, and a failure that fails calls at once only while nothing is known.
@Suite("Redis rediscovery gate")
struct RedisRediscoveryTests {
    @Test("one learner at a time, at most once per interval unless urgent; success restarts the interval")
    func gate() {
        var gate = RedisRediscovery()
        var started = gate.begin(now: 1_000, interval: 100)
        #expect(started)
        started = gate.begin(now: 1_010, interval: 100, urgent: true)
        #expect(!started, "another caller is learning: not even urgent starts a second")
        #expect(!gate.isDue(now: 5_000, interval: 100), "nothing is due while one learns")
        gate.end()
        started = gate.begin(now: 1_050, interval: 100)
        #expect(!started, "within the interval of the last start")
        started = gate.begin(now: 1_060, interval: 100, urgent: true)
        #expect(started, "urgent does not wait for the interval")
        gate.end()
        #expect(!gate.isDue(now: 1_100, interval: 100))
        #expect(gate.isDue(now: 1_160, interval: 100))
        gate.learned(now: 1_200)
        #expect(!gate.isDue(now: 1_250, interval: 100), "an answer counts as the last time")
        started = gate.begin(now: 1_300, interval: 100)
        #expect(started)
    }

    @Test("a failure fails calls at once until its time, only while nothing is known; learning clears it")
    func failure() {
        let error = RedisClientError(.closed, "no node answered")
        var gate = RedisRediscovery()
        #expect(gate.failing(now: 0) == nil)
        gate.failed(error, until: 500, knowsNothing: true)
        #expect(gate.failing(now: 499) == error)
        #expect(gate.failing(now: 500) == nil, "waited out")
        gate.failed(error, until: 500, knowsNothing: false)
        #expect(gate.failing(now: 100) == nil, "a router that knows where to go keeps going there")
        gate.failed(error, until: 500, knowsNothing: true)
        gate.learned()
        #expect(gate.failing(now: 100) == nil)
    }
}
