import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackOrigin
import Synchronization
import Testing
@testable import HTTPCaching

/// A data delegate that applies backpressure, as swift-openapi-urlsession's streaming body
/// does: it suspends the task inside `didReceive(data)` once it holds enough, and resumes it
/// from another queue when it has drained. Every byte arrives, once, in order.
@Suite struct BackpressureTests {
    /// 2 MB of distinct bytes (little-endian counters), so a chunk out of place shows. Made per
    /// test, not kept in a static (which the leak checker reports).
    static func countingBytes() -> Data {
        var data = Data(capacity: 2 << 20)
        var counter: UInt32 = 0
        while data.count < 2 << 20 {
            withUnsafeBytes(of: counter.littleEndian) { data.append(contentsOf: $0) }
            counter += 1
        }
        return data
    }

    /// A delegate that suspends the task every second chunk and resumes it from another
    /// queue right after.
    private func backpressuredProbe() -> ProbeDelegate {
        let consumer = DispatchQueue(label: "consumer")
        let held = Mutex((chunks: 0, suspended: false))
        return ProbeDelegate(onEvent: { event, task in
            guard event == "data" else { return }
            let suspend = held.withLock { held -> Bool in
                held.chunks += 1
                guard held.chunks >= 2, !held.suspended else { return false }
                held.suspended = true
                return true
            }
            guard suspend else { return }
            task.suspend()
            consumer.async {
                held.withLock { $0 = (0, false) }
                task.resume()
            }
        })
    }

    @Test("suspend() in didReceive(data) and resume() from another queue: a miss streamed piece by piece, then a hit, arrive whole and in order")
    func suspendAndResumeFromAnotherQueue() async throws {
        let h = try Harness()
        let body = Self.countingBytes()
        for round in 0..<10 {
            let stream = LoopbackOrigin.BodyStream()
            h.origin.route("/stream\(round)", response: .init(headers: [("Cache-Control", "max-age=600")], stream: stream))
            // Written from a dispatch thread, not a task: the suite's tasks can keep the
            // cooperative pool busy, and the body would never come.
            let written = Watched(false)
            DispatchQueue.global().async {
                var offset = 0
                while offset < body.count {
                    stream.write(body[offset..<min(body.count, offset + 16_384)])
                    offset += 16_384
                }
                stream.finish()
                written.update { $0 = true }
            }
            for answer in ["miss", "hit"] {
                let probe = backpressuredProbe()
                let session = h.session(caching: true, probe)
                defer { session.finishTasksAndInvalidate() }
                session.dataTask(with: h.origin.url("/stream\(round)")).resume()
                let state = try #require(await probe.finished(timeout: 30), "round \(round) \(answer)")
                #expect(state.error == nil, "round \(round) \(answer)")
                #expect(state.byteCount == body.count, "round \(round) \(answer)")
                #expect(state.data == body, "round \(round) \(answer): every byte, once, in order")
            }
            #expect(await written.wait { $0 })
            #expect(h.origin.requestCount("/stream\(round)") == 1)
        }
    }
}
