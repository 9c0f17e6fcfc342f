import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching

/// One request through the cache, as the demo reports it.
struct Row {
    let n: Int
    let elapsed: TimeInterval
    let cache: String
    let status: Int
    let body: Data
    let ms: Double
    /// The request's method.
    var method = "GET"
    /// The size of the request's body; nil without one.
    var sentBytes: Int?

    /// `{"n":1,"cache":"miss","status":200,"bytes":123,"ms":4.2,"elapsed":0.0,"method":"GET"}`,
    /// and `"sent_bytes"` when the request had a body.
    var jsonLine: JSONLine {
        var fields: [(String, JSONLine.Value)] = [
            ("n", .int(n)), ("cache", .string(cache)), ("status", .int(status)), ("bytes", .int(body.count)),
            ("ms", .number(ms)), ("elapsed", .number(elapsed)), ("method", .string(method)),
        ]
        if let sentBytes { fields.append(("sent_bytes", .int(sentBytes))) }
        return JSONLine(fields)
    }
}

/// Makes numbered requests on a caching session and times them.
struct Runner {
    /// A cache on the store the command line chose; nil (with a message) if it cannot be opened.
    static func makeCache(store choice: StoreChoice, windows: CacheWindows, policy: CachingPolicy,
                          keyRewriter: (@Sendable (CacheKey, URLRequest) -> CacheKey)? = nil,
                          storesPartialContent: Bool = false) -> HTTPCache? {
        do {
            let configuration = CacheConfiguration(windows: windows, keyRewriter: keyRewriter, policy: policy,
                                                   storesPartialContent: storesPartialContent)
            return HTTPCache(configuration: configuration, store: try choice.makeStore())
        } catch {
            Output.error("cannot open the store: \(error)")
            return nil
        }
    }

    let session: URLSession
    let started = Date()

    func request(_ n: Int, _ url: URL) async throws -> Row {
        try await request(n, URLRequest(url: url))
    }

    func request(_ n: Int, _ request: URLRequest) async throws -> Row {
        let begin = DispatchTime.now()
        let (data, response) = try await session.data(for: request)
        let ms = Double(DispatchTime.now().uptimeNanoseconds - begin.uptimeNanoseconds) / 1e6
        let http = response as? HTTPURLResponse
        return Row(n: n, elapsed: Date().timeIntervalSince(started), cache: http?.cacheStatus?.rawValue ?? "none",
                   status: http?.statusCode ?? 0, body: data, ms: ms, method: request.httpMethod ?? "GET",
                   sentBytes: request.httpBody?.count)
    }

}

/// Follows a cache's background refreshes through its events: a stale answer starts one for
/// its key; `refreshed` or `refreshFailed` ends it.
final class RefreshTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var pending: Set<CacheKey> = []
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var observation: CacheObservation?

    init(_ cache: HTTPCache) {
        observation = cache.observe { [weak self] event in
            if event.kind == .served(.stale) { self?.update { $0.insert(event.key) } }
            if ["refreshed", "refreshFailed"].contains(event.kind.name) { self?.update { $0.remove(event.key) } }
        }
    }

    deinit { observation?.cancel() }

    private func update(_ change: (inout Set<CacheKey>) -> Void) {
        let ready: [CheckedContinuation<Void, Never>] = lock.withLock {
            change(&pending)
            guard pending.isEmpty else { return [] }
            defer { waiters.removeAll() }
            return waiters
        }
        for waiter in ready { waiter.resume() }
    }

    /// Waits until no background refresh is running, at most `limit` seconds.
    func wait(limit: TimeInterval = 30) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle: Bool = lock.withLock {
                if pending.isEmpty { return true }
                waiters.append(continuation)
                return false
            }
            if idle { return continuation.resume() }
            DispatchQueue.global().asyncAfter(deadline: .now() + limit) { [weak self] in
                guard let self else { return }
                let late: [CheckedContinuation<Void, Never>] = self.lock.withLock {
                    defer { self.waiters.removeAll() }
                    return self.waiters
                }
                for waiter in late { waiter.resume() }
            }
        }
    }
}

/// A fixed-width table printed a row at a time.
struct Table {
    let columns: [(title: String, width: Int)]

    func header() {
        Output.line(columns.map { pad($0.title, $0.width) }.joined(separator: "  "))
        Output.line(columns.map { String(repeating: "-", count: $0.width) }.joined(separator: "  "))
    }

    func row(_ cells: [String]) {
        Output.line(zip(columns, cells).map { pad($1, $0.width) }.joined(separator: "  "))
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}

func format(_ value: Double, _ decimals: Int = 1) -> String {
    String(format: "%.\(decimals)f", value)
}
