import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one installed protocol class serves: a cache, the session that forwards its requests
/// with the caller's own settings, and the caller's settings the protocol cannot see.
///
/// A URLProtocol cannot see the session it serves (`task.session` is internal, and on Linux no
/// session setting reaches the request but cookies), so each installation gets its own
/// protocol class, and the class finds its binding here.
final class ProtocolBinding: Sendable {
    let cache: HTTPCache
    /// The cache's engine, which the plumbing works through.
    var engine: CacheEngine { cache.engine }
    let forwarding: ForwardingSession
    /// The session's `httpAdditionalHeaders`: they reach the network (added by Foundation's
    /// HTTP class in the forwarding session) but not the request the cache sees, so keys,
    /// `Vary` and credential partitions look here too.
    let sessionHeaders: [String: String]
    let keys: KeyDerivation
    /// Responses built for hits, reused while the entry version and its disposition match.
    let builtResponses = BuiltResponses()
    /// Where forwarded tasks are created, resumed, suspended and cancelled: never Foundation's
    /// shared URLSession queue (doing it there waits on the queue the thread holds, and
    /// traps), and a serial queue, so it always gets a thread.
    let control = DispatchQueue(label: "HTTPCaching.forwarding.control", qos: .userInitiated)
    /// The caller's credential storage, for authentication challenges (the same object its
    /// session uses).
    let credentialStorage: UncheckedBox<URLCredentialStorage?>
    /// What this installation's sessions asked of the cache (requests, origin traffic,
    /// refreshes); the store's own counters are the cache's.
    let statistics: StatisticsCounters

    /// The session's `requestCachePolicy`: what a request asking for `.useProtocolCachePolicy`
    /// gets, as on Darwin (Foundation on Linux never applies it).
    let sessionCachePolicy: URLRequest.CachePolicy

    init(cache: HTTPCache, forwarding configuration: URLSessionConfiguration) {
        self.cache = cache
        sessionCachePolicy = configuration.requestCachePolicy
        var headers: [String: String] = [:]
        for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        sessionHeaders = headers
        keys = KeyDerivation(configuration: cache.configuration, sessionHeaders: headers)
        credentialStorage = UncheckedBox(configuration.urlCredentialStorage)
        statistics = StatisticsCounters(since: cache.engine.now())
        forwarding = ForwardingSession(configuration: configuration)
    }

    /// Whether `session` adds to its requests the fields the keys were made with, no more and no
    /// other (a session made after more were set on the configuration adds those too).
    func keysHeaders(of session: URLSession) -> Bool {
        let added = session.configuration.httpAdditionalHeaders ?? [:]
        return added.count == sessionHeaders.count && added.allSatisfy { name, value in
            (name as? String).flatMap { sessionHeaders[$0] } == value as? String
        }
    }

    /// Counts traffic for the cache and for this installation.
    func count(originRequests: Int = 0, servedFromStore: Int = 0, fetchedFromOrigin: Int = 0, refreshesStarted: Int = 0,
               servedThroughNoVarySearch: Int = 0) {
        for counters in [engine.statistics, statistics] {
            counters.add(originRequests: originRequests, servedFromStore: servedFromStore, fetchedFromOrigin: fetchedFromOrigin,
                         refreshesStarted: refreshesStarted, servedThroughNoVarySearch: servedThroughNoVarySearch)
        }
    }

    /// A request as these sessions' tasks make it: one that asks for `.useProtocolCachePolicy`
    /// gets the session's `requestCachePolicy`, as on Darwin (Foundation on Linux never applies it).
    func withSessionPolicy(_ request: URLRequest) -> URLRequest {
        guard request.cachePolicy == .useProtocolCachePolicy, sessionCachePolicy != .useProtocolCachePolicy else { return request }
        var request = request
        request.cachePolicy = sessionCachePolicy
        return request
    }

    /// The key of the entry stored under a request's URL, with this binding's session headers.
    /// - Throws: what the store's `partitionSecret()` throws, for a credentialed request.
    func key(for request: URLRequest, bodyDigest: String? = nil) throws -> CacheKey {
        try keys.key(for: request, headers: keys.headers(request), bodyDigest: bodyDigest, secret: engine.partitionSecret)
    }
}

/// A value that is not `Sendable` but that the code guards itself (set once, read after).
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Hit responses already built. Building an `HTTPURLResponse` is most of what a hit costs
/// (Foundation does work per header), and one is immutable, so tasks may share it: a hit on
/// the same entry version for the same URL with the same disposition and form gets the same
/// object.
final class BuiltResponses: Sendable {
    private struct Key: Hashable {
        let generation: UInt64
        let storedAt: Date
        let url: URL
        let disposition: Disposition
        let form: ServeForm
    }

    private let built = Mutex<[Key: UncheckedBox<(HTTPURLResponse, Range<Int>)>]>([:])
    private let limit = 1024

    /// The response answering a request for `url` from `entry`: its URL is the request's, as
    /// Foundation gives it (userinfo and fragment included), not the one the entry was stored from.
    func response(for entry: CacheEntry, url: URL, form: ServeForm, disposition: Disposition,
                  cacheName: String) -> (response: HTTPURLResponse, body: Range<Int>) {
        var rounded = disposition
        rounded.age = disposition.age.map { Freshness.clamp($0).rounded(.down) }
        rounded.ttl = disposition.ttl.map { $0.rounded(.down) }
        let key = Key(generation: entry.generation, storedAt: entry.storedAt, url: url, disposition: rounded, form: form)
        if let found = built.withLock({ $0[key] }) { return found.value }
        var (head, body) = Answers.fromEntry(entry, form: form, disposition: rounded, cacheName: cacheName)
        head.url = url
        let response = HTTPURLResponse(head)
        built.withLock { built in
            if built.count >= limit { built.removeAll(keepingCapacity: true) }
            built[key] = UncheckedBox((response, body))
        }
        return (response, body)
    }
}

extension HTTPURLResponse {
    /// A response from a head the cache built.
    convenience init(_ head: ResponseHead) {
        self.init(url: head.url, statusCode: head.statusCode, httpVersion: "HTTP/1.1", headerFields: head.headers)!
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
    private struct Slot {
        weak var binding: ProtocolBinding?
        let number: Int
        let permanent: Bool
        /// Whether another installation had this class before: only then can a session other
        /// than this binding's reach it (one whose `urlCache` was replaced).
        let reused: Bool
    }

    private struct State {
        var next = 0
        /// Slot numbers whose installation is gone, to reuse: the number of classes (whose
        /// metadata is never freed) stays the number of installations alive at once.
        var free: [Int] = []
        var slots: [ObjectIdentifier: Slot] = [:]
        /// Bindings made by `protocolClass(for:)`, which live as long as the process.
        var permanent: [ProtocolBinding] = []
    }

    private static let state = Mutex(State())

    /// The binding of `CachingURLProtocol` itself (used through `registerClass` or when put
    /// in `protocolClasses` by hand): the shared cache, forwarding with `.default` settings.
    static let defaultBinding = ProtocolBinding(cache: .shared, forwarding: .default)

    /// Makes a protocol class bound to `binding`: a new one, or one whose installation is
    /// gone. A permanent binding lives as long as the process (and keeps its class); otherwise
    /// the caller keeps it alive (an installation's carrier does) and calls `forget` when done.
    static func makeClass(for binding: ProtocolBinding, permanent: Bool) -> CachingURLProtocol.Type {
        state.withLock { state in
            let number: Int
            let reused = state.free.popLast()
            if let reused {
                number = reused
            } else {
                state.next += 1
                number = state.next
            }
            let type = classForSlot(SlotRoot.self, bits: number)
            state.slots[ObjectIdentifier(type)] = Slot(binding: binding, number: number, permanent: permanent, reused: reused != nil)
            if permanent { state.permanent.append(binding) }
            return type
        }
    }

    /// The binding of a protocol class; nil once an installation's binding is gone.
    static func binding(for type: AnyClass) -> ProtocolBinding? {
        if type == CachingURLProtocol.self { return defaultBinding }
        return state.withLock { $0.slots[ObjectIdentifier(type)]?.binding }
    }

    /// The binding that serves `task`, which a protocol of class `type` was made for (on the
    /// task's work queue, with the task's session if it can be read).
    ///
    /// An installation's class is reused once its installation is gone, so it serves only a
    /// session that carries its current binding in its configuration's `urlCache`; one that
    /// does not (its `urlCache` was replaced) gets nil rather than another installation's
    /// cache. When the session cannot be read, the registry answers.
    static func binding(for type: AnyClass, session: URLSession?) -> ProtocolBinding? {
        if type == CachingURLProtocol.self { return defaultBinding }
        if let session, !isPermanent(type) {
            guard let carrier = session.configuration.urlCache as? InstallationCarrier, carrier.protocolClass == type else {
                return nil
            }
            return carrier.binding
        }
        return binding(for: type)
    }

    /// Whether a class's binding must be checked against the session asking (its slot was
    /// reused); a class never reused serves only sessions of its own installation, and the
    /// session need not be read (reflection is most of what a hit would cost).
    static func needsSessionCheck(_ type: AnyClass) -> Bool {
        state.withLock { slot in slot.slots[ObjectIdentifier(type)].map { $0.reused && !$0.permanent } ?? false }
    }

    private static func isPermanent(_ type: AnyClass) -> Bool {
        state.withLock { $0.slots[ObjectIdentifier(type)]?.permanent ?? false }
    }

    /// Forgets a class whose installation is gone, and frees its slot for the next one.
    static func forget(_ type: AnyClass) {
        state.withLock { state in
            guard let slot = state.slots.removeValue(forKey: ObjectIdentifier(type)), !slot.permanent else { return }
            state.free.append(slot.number)
        }
    }

    /// How many protocol classes have been made so far (for tests).
    static var classCount: Int { state.withLock { $0.next } }

    private static func classForSlot<S: BindingSlot>(_ slot: S.Type, bits: Int) -> CachingURLProtocol.Type {
        if bits == 0 { return BoundCachingURLProtocol<S>.self }
        return bits & 1 == 0 ? classForSlot(SlotBit0<S>.self, bits: bits >> 1)
                             : classForSlot(SlotBit1<S>.self, bits: bits >> 1)
    }
}

/// Keeps an installation's binding alive exactly as long as a configuration or a session made
/// from it exists: it rides in their `urlCache` (which caching sets anyway), and answers
/// nothing, so Foundation's own cache stays out of the way.
final class InstallationCarrier: URLCache, @unchecked Sendable {
    let binding: ProtocolBinding
    let protocolClass: AnyClass

    init(binding: ProtocolBinding, protocolClass: AnyClass) {
        self.binding = binding
        self.protocolClass = protocolClass
        // A directory that exists, so Foundation creates none; the carrier never writes to it.
        super.init(memoryCapacity: 0, diskCapacity: 0, diskPath: FileManager.default.temporaryDirectory.path)
    }

    deinit {
        BindingRegistry.forget(protocolClass)
    }

    override func cachedResponse(for request: URLRequest) -> CachedURLResponse? { nil }
    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for request: URLRequest) {}
    override func storeCachedResponse(_ cachedResponse: CachedURLResponse, for dataTask: URLSessionDataTask) {}
    /// Answers at once (Foundation's default hops to a background queue on every request).
    override func getCachedResponse(for dataTask: URLSessionDataTask,
                                    completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void) {
        completionHandler(nil)
    }
    override func removeCachedResponse(for request: URLRequest) {}
    override func removeCachedResponse(for dataTask: URLSessionDataTask) {}
    override func removeAllCachedResponses() {}
    override func removeCachedResponses(since date: Date) {}
    override var currentMemoryUsage: Int { 0 }
    override var currentDiskUsage: Int { 0 }
}
