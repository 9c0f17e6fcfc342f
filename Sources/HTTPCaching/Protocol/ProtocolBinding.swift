import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one installed protocol class serves: a cache, and the session that forwards its
/// requests to the network with the caller's own settings.
///
/// A URLProtocol cannot see the session it serves (`task.session` is internal, and on Linux
/// no session setting reaches the request but cookies), so each installation gets its own
/// protocol class, and the class finds its binding here.
final class ProtocolBinding: Sendable {
    let cache: HTTPCache
    /// The settings forwarded requests go out with, and the session made from them on first
    /// use. Made lazily: creating any URLSession registers Foundation's built-in protocol
    /// classes, which must not happen inside `protocolClass(for:)` before the user's own
    /// `URLProtocol.registerClass` call, or the built-in HTTP class would answer first.
    private let forwarding: Mutex<(configuration: URLSessionConfiguration, session: URLSession?)>
    /// Where forwarded tasks are created: never synchronously on the URLSession work queue
    /// that runs `startLoading` (that traps on Linux).
    let queue = DispatchQueue(label: "HTTPCaching.forward", qos: .userInitiated, attributes: .concurrent)
    /// The session's `httpAdditionalHeaders`: they reach the network (added by Foundation's
    /// HTTP class in the forwarding session) but not the request the cache sees, so `Vary`
    /// and credential partitioning look here too.
    let sessionHeaders: [String: String]
    /// Responses built for hits, reused while the entry, status and whole-second age match.
    let builtResponses = BuiltResponses()

    init(cache: HTTPCache, forwarding configuration: URLSessionConfiguration) {
        self.cache = cache
        var headers: [String: String] = [:]
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        sessionHeaders = headers
        let forwarding = configuration.copy() as! URLSessionConfiguration
        forwarding.protocolClasses = (forwarding.protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        forwarding.urlCache = nil
        forwarding.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.forwarding = Mutex((forwarding, nil))
    }

    /// Forwards requests; its protocol classes never include a caching class, so nothing
    /// it sends can come back to the cache (the loop guard that works on Linux).
    var session: URLSession {
        forwarding.withLock { state in
            if let session = state.session { return session }
            let session = URLSession(configuration: state.configuration)
            state.session = session
            return session
        }
    }

    /// The request as it goes to the network: marked as handled, private headers removed,
    /// made conditional on `validating`'s validators if given.
    static func forwardingRequest(from request: URLRequest, validating entry: CacheEntry? = nil) -> URLRequest {
        let mutable = (request as NSURLRequest).mutableCopy() as! NSMutableURLRequest
        for name in HTTPCachingHeaders.allPrivate { mutable.setValue(nil, forHTTPHeaderField: name) }
        if let entry {
            for (name, value) in CacheDecision.conditionalHeaders(for: entry) { mutable.setValue(value, forHTTPHeaderField: name) }
        }
        URLProtocol.setProperty(true, forKey: CachingURLProtocol.handledKey, in: mutable)
        return mutable as URLRequest
    }

    /// Sends a request through the forwarding session, off the caller's queue.
    /// - Parameter started: called with the task before it resumes; returning false
    ///   cancels it instead (the caller stopped meanwhile).
    func fetch(_ request: URLRequest,
               started: @escaping @Sendable (URLSessionDataTask) -> Bool = { _ in true },
               completion: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) {
        let session = self.session
        queue.async {
            let task = session.dataTask(with: request, completionHandler: completion)
            if started(task) { task.resume() } else { task.cancel() }
        }
    }

    /// Refreshes a stale entry in the background, at most once at a time per key: a
    /// conditional request if the entry has a validator. Never touches the request's client:
    /// the caller was already answered. On failure the stale entry is kept.
    func refresh(_ key: CacheKey, request: URLRequest, headers: RequestHeaders, previous: CacheEntry) {
        let cache = self.cache
        guard cache.beginRefresh(key) else { return }
        let url = request.url
        let validating = CacheDecision.hasValidator(previous) ? previous : nil
        fetch(Self.forwardingRequest(from: request, validating: validating)) { data, response, error in
            defer { cache.endRefresh(key) }
            guard error == nil, let http = response as? HTTPURLResponse else {
                cache.emit(.refreshFailed(reason: error?.localizedDescription ?? "not an HTTP response"), key, url)
                return
            }
            if http.statusCode == 304, validating != nil {
                _ = cache.revalidate(previous, with: http)
                cache.emit(.refreshed(bodyChanged: false), key, url)
                return
            }
            let body = data ?? Data()
            if cache.isStorable(http, for: request, headers: headers),
               let stored = cache.record(http, body: body, for: request, headers: headers, key: key) {
                cache.emit(.refreshed(bodyChanged: stored.body != previous.body), key, url)
            } else {
                cache.emit(.refreshFailed(reason: "status \(http.statusCode) not stored; stale entry kept"), key, url)
            }
        }
    }
}

/// Hit responses already built. Building an `HTTPURLResponse` is most of what a hit costs
/// (Foundation does work per header), and one is immutable, so tasks may share it: a hit on
/// the same entry, with the same status, in the same second of age gets the same object.
final class BuiltResponses: @unchecked Sendable {
    private struct Built {
        let storedAt: Date
        let status: CacheStatus
        let age: Int
        let response: HTTPURLResponse
    }

    private let lock = NSLock()
    private var built: [CacheKey: Built] = [:]
    private let limit = 1024

    func response(for entry: CacheEntry, status: CacheStatus, age: TimeInterval) -> HTTPURLResponse {
        let seconds = Int(age)
        lock.lock()
        if let found = built[entry.key], found.storedAt == entry.storedAt, found.status == status, found.age == seconds {
            lock.unlock()
            return found.response
        }
        lock.unlock()
        let response = CachingURLProtocol.response(for: entry, status: status, age: age)
        lock.lock()
        if built.count >= limit { built.removeAll(keepingCapacity: true) }
        built[entry.key] = Built(storedAt: entry.storedAt, status: status, age: seconds, response: response)
        lock.unlock()
        return response
    }
}

// MARK: - One protocol class per binding

/// Distinct generic instantiations give distinct classes at run time, as many as needed,
/// with no Objective-C runtime: the n-th class is `BoundCachingURLProtocol<...>` with n's
/// bits spelled out in the type.
protocol BindingSlot {}
enum SlotRoot: BindingSlot {}
enum SlotBit0<Rest: BindingSlot>: BindingSlot {}
enum SlotBit1<Rest: BindingSlot>: BindingSlot {}

final class BoundCachingURLProtocol<Slot: BindingSlot>: CachingURLProtocol {}

enum BindingRegistry {
    private struct State {
        var next = 0
        var bindings: [ObjectIdentifier: ProtocolBinding] = [:]
    }

    private static let state = Mutex(State())

    /// The binding of `CachingURLProtocol` itself (used through `registerClass` or when put
    /// in `protocolClasses` by hand): the shared cache, forwarding with `.default` settings.
    static let defaultBinding = ProtocolBinding(cache: .shared, forwarding: .default)

    /// Makes a new protocol class bound to `binding`.
    static func makeClass(for binding: ProtocolBinding) -> CachingURLProtocol.Type {
        state.withLock { state in
            state.next += 1
            let type = classForSlot(SlotRoot.self, bits: state.next)
            state.bindings[ObjectIdentifier(type)] = binding
            return type
        }
    }

    static func binding(for type: AnyClass) -> ProtocolBinding {
        state.withLock { $0.bindings[ObjectIdentifier(type)] } ?? defaultBinding
    }

    private static func classForSlot<S: BindingSlot>(_ slot: S.Type, bits: Int) -> CachingURLProtocol.Type {
        if bits == 0 { return BoundCachingURLProtocol<S>.self }
        return bits & 1 == 0 ? classForSlot(SlotBit0<S>.self, bits: bits >> 1)
                             : classForSlot(SlotBit1<S>.self, bits: bits >> 1)
    }
}
