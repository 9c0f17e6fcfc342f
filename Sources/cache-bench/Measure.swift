import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Monotonic seconds.
func now() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}

/// Seconds of CPU the whole process has used, every thread's.
func processCPUTime() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Bodies kept as a memory store keeps them (the buffer Foundation filled, not a copy), the
/// oldest let go past a byte limit: what keeping the bytes costs, without a cache.
final class BodyKeeper: @unchecked Sendable {
    private let lock = NSLock()
    private var bodies: [Data] = []
    private var first = 0
    private var bytes = 0
    private let limit: Int

    init(byteLimit: Int) { limit = byteLimit }

    func keep(_ body: Data) {
        lock.lock()
        defer { lock.unlock() }
        bodies.append(body)
        bytes += body.count
        while bytes > limit, first < bodies.count {
            bytes -= bodies[first].count
            bodies[first] = Data()
            first += 1
        }
        if first > 1024 { bodies.removeFirst(first); first = 0 }
    }
}

/// A value written by one thread and read by another after a semaphore.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// One request on a completion-handler data task, waited for; returns the body length (-1
/// on error). With `keeper`, the body is kept there.
@discardableResult
func get(_ session: URLSession, _ url: URL, keeping keeper: BodyKeeper? = nil) -> Int {
    let done = DispatchSemaphore(value: 0)
    let bytes = Box(-1)
    session.dataTask(with: url) { data, _, error in
        if error == nil { bytes.value = data?.count ?? 0 }
        if let data { keeper?.keep(data) }
        done.signal()
    }.resume()
    done.wait()
    return bytes.value
}

/// Requests per second with `callers` request loops in flight at once, `total` requests in all.
func requestsPerSecond(_ session: URLSession, urls: [URL], callers: Int, total: Int) -> Double {
    let group = DispatchGroup()
    let lock = NSLock()
    let issued = Box(0)
    @Sendable func next() {
        lock.lock()
        let n = issued.value
        issued.value += 1
        lock.unlock()
        guard n < total else { return }
        group.enter()
        session.dataTask(with: urls[n % urls.count]) { _, _, _ in
            next()
            group.leave()
        }.resume()
    }
    let start = now()
    for _ in 0..<callers { next() }
    group.wait()
    return Double(total) / (now() - start)
}

/// The process's peak resident memory in MiB (VmHWM), and a way to reset it.
enum ResidentMemory {
    static func peakMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return .nan }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Double($0) }
            return (kib ?? .nan) / 1024
        }
        return .nan
    }

    /// Resets the peak to the current size (Linux 4.0 and later); false if not possible.
    static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }
}

func formatMicros(_ seconds: Double) -> String {
    String(format: "%9.1f", seconds * 1e6)
}

func formatRatio(_ value: Double) -> String {
    String(format: "%.2f", value)
}
