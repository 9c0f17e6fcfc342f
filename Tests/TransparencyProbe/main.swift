// Run by the tests in a fresh process, where resident memory is this program's alone.
//
//   transparency-probe lifetime CYCLES REQUESTS_EVERY
//       Installs caching on a new configuration, makes a session from it, and drops both,
//       CYCLES times; every REQUESTS_EVERY-th cycle (0: never) also sends a miss and a hit
//       through the session first. Prints "rss-before KB", "rss-mid KB" (after a fifth of
//       the cycles), "rss-after KB" and "ok".
//   transparency-probe plain CYCLES [REQUESTS_EVERY]
//       The same cycles without caching, for comparison.
//   transparency-probe stream BYTES [plain]
//       Streams BYTES (no length, 1 MB writes) through a delegate session on a caching
//       configuration (a plain one with "plain") whose store keeps entries up to 8 MB, and
//       prints the bytes and chunks the delegate got, whether its response came before the
//       origin had sent the whole body, the cache's stored / notStored(tooLarge) events, and
//       how far the peak resident memory grew over the transfer.
//   transparency-probe swift-cancel SECONDS [caching]
//       Rounds of 200 concurrent data(for:) calls whose Swift tasks are cancelled while they
//       wait, on a plain session (a caching one with "caching"), for up to SECONDS. Prints
//       "deadlock after N rounds" as soon as a round stops making progress (Foundation
//       6.3.1's own lock-order inversion, corelibs issue 5412), else "no deadlock in N rounds".
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Resident memory in KB, from /proc/self/statm.
func residentKB() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return -1 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return -1 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

func get(_ session: URLSession, _ url: URL) {
    let done = DispatchSemaphore(value: 0)
    session.dataTask(with: url) { _, _, _ in done.signal() }.resume()
    done.wait()
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let cycles = Int(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: transparency-probe lifetime|plain CYCLES [REQUESTS_EVERY]\n".utf8))
    exit(2)
}
let origin = try LoopbackOrigin()
origin.route("/probe", response: .init(headers: [("Cache-Control", "max-age=600")], text: "probe"))
origin.route("/fresh", response: .init(headers: [("Cache-Control", "no-store")], text: "fresh"))
let cache = HTTPCache()

func cycle(_ index: Int, caching: Bool, requestsEvery: Int) {
    do {
        let configuration = URLSessionConfiguration.ephemeral
        if caching { configuration.enableHTTPCaching(cache) }
        let session = URLSession(configuration: configuration)
        if requestsEvery > 0 && index % requestsEvery == 0 {
            // A miss then hits on one key, and a response never stored (forwarded every time).
            get(session, origin.url("/probe"))
            get(session, origin.url("/fresh"))
        }
        session.finishTasksAndInvalidate()
    }
}

switch arguments[1] {
case "lifetime", "plain":
    let caching = arguments[1] == "lifetime"
    let requestsEvery = arguments.count > 3 ? Int(arguments[3]) ?? 0 : 0
    // Warm up: first sessions, first classes, Foundation's one-time allocations.
    for index in 0..<200 { cycle(index, caching: caching, requestsEvery: requestsEvery) }
    say("rss-before \(residentKB())")
    for index in 0..<cycles {
        if index == cycles / 5 { say("rss-mid \(residentKB())") }
        cycle(index, caching: caching, requestsEvery: requestsEvery)
    }
    say("rss-after \(residentKB())")
    say("ok")
case "swift-cancel":
    swiftCancel(seconds: cycles, caching: arguments.contains("caching"))
case "stream":
    try stream(bytes: cycles, caching: !arguments.contains("plain"))
default:
    exit(2)
}

/// Peak resident memory so far in KB (VmHWM), from /proc/self/status.
func peakResidentKB() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }
    return -1
}

/// Counts what a streaming delegate gets, keeping none of it.
final class CountingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let lock = NSLock()
    var bytes = 0
    var chunks = 0
    var responseBeforeEnd = false
    var stream: LoopbackOrigin.BodyStream?
    var total = 0
    let done = DispatchSemaphore(value: 0)

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let early = (stream?.bytesSent ?? total) < total
        lock.withLock { responseBeforeEnd = early }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock {
            bytes += data.count
            chunks += 1
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let error { say("error \(error)") }
        done.signal()
    }
}

/// Counts a cache's stored and notStored(tooLarge) events.
final class StoreEventCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = 0
    private var tooLarge = 0
    private var observation: CacheObservation?

    init(_ cache: HTTPCache) {
        observation = cache.observe { [self] event in
            lock.withLock {
                if event.kind == .stored { stored += 1 }
                if event.kind.notStoredReason?.name == "tooLarge" { tooLarge += 1 }
            }
        }
    }

    /// Stops counting and prints the counts.
    func report() {
        observation?.cancel()
        lock.withLock {
            say("stored \(stored)")
            say("not-stored-too-large \(tooLarge)")
        }
    }
}

/// Writes `total` bytes to `body` in 1 MB pieces, each once the last has gone out (pausing
/// PROBE_PAUSE_MS between them), then finishes it; returns when it has.
func write(_ total: Int, to body: LoopbackOrigin.BodyStream) {
    let piece = Data(repeating: UInt8(ascii: "x"), count: 1 << 20)
    let writer = DispatchSemaphore(value: 0)
    Task {
        guard await body.headersSent() else { _ = writer.signal(); return }
        var sent = 0
        while sent < total {
            let count = min(piece.count, total - sent)
            body.write(count == piece.count ? piece : piece.prefix(count))
            sent += count
            _ = await body.flushed()
            if let pause = ProcessInfo.processInfo.environment["PROBE_PAUSE_MS"].flatMap(Int.init) {
                try? await Task.sleep(nanoseconds: UInt64(pause) * 1_000_000)
            }
        }
        body.finish()
        _ = writer.signal()
    }
    writer.wait()
}

func stream(bytes total: Int, caching: Bool) throws {
    let store = try MemoryResponseStore(byteLimit: 64 << 20, maxEntrySize: 8 << 20)
    let streamingCache = HTTPCache(store: store)
    let counts = StoreEventCounts(streamingCache)
    let body = LoopbackOrigin.BodyStream()
    origin.route("/big", response: .init(headers: [("Cache-Control", "max-age=600")], stream: body))
    let delegate = CountingDelegate()
    delegate.stream = body
    delegate.total = total
    let configuration = URLSessionConfiguration.ephemeral
    if caching { configuration.enableHTTPCaching(streamingCache) } else { configuration.urlCache = nil }
    let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    let before = residentKB()
    session.dataTask(with: origin.url("/big")).resume()
    write(total, to: body)
    delegate.done.wait()
    let peak = peakResidentKB()
    session.finishTasksAndInvalidate()
    delegate.lock.withLock {
        say("bytes \(delegate.bytes)")
        say("chunks \(delegate.chunks)")
        say("response-before-body-end \(delegate.responseBeforeEnd ? 1 : 0)")
    }
    counts.report()
    say("peak-growth-kb \(peak - before)")
}

func swiftCancel(seconds: Int, caching: Bool) {
    let configuration = URLSessionConfiguration.ephemeral
    if caching { configuration.enableHTTPCaching(HTTPCache()) } else { configuration.urlCache = nil }
    let session = URLSession(configuration: configuration)
    let deadline = Date().addingTimeInterval(TimeInterval(seconds))
    var rounds = 0
    while Date() < deadline {
        rounds += 1
        let finished = DispatchSemaphore(value: 0)
        let round = rounds
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask { _ = try? await session.data(for: URLRequest(url: origin.url("/fresh?\(round)-\(index)"))) }
                }
                for _ in 0..<100 { await Task.yield() }
                group.cancelAll()
            }
            finished.signal()
        }
        if finished.wait(timeout: .now() + 3) == .timedOut {
            say("deadlock after \(rounds) rounds")
            exit(0)
        }
    }
    say("no deadlock in \(rounds) rounds")
}
