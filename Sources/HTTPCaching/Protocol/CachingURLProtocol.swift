import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The URLProtocol that answers http and https requests from an `HTTPCache`.
///
/// Install it with `URLSessionConfiguration.enableHTTPCaching(_:)`, which gives each
/// configuration its own class bound to its cache and settings. Putting
/// `CachingURLProtocol.self` in `protocolClasses` by hand, or registering it with
/// `URLProtocol.registerClass`, uses `HTTPCache.shared` and the `.default` configuration's
/// settings for forwarded requests.
///
/// Download tasks cannot be served by a custom protocol on Linux (swift-corelibs-foundation
/// crashes delivering to them); on a caching session they fail at once with
/// `CachingError.downloadTaskUnsupported`. Use a data task.
open class CachingURLProtocol: URLProtocol {
    /// The protocol property that marks a request this cache forwarded.
    public static let handledKey = "HTTPCaching.handled"

    private var delivery: Delivery?

    /// A protocol class bound to a cache, forwarding with a copy of `configuration`'s
    /// settings, for `URLProtocol.registerClass` or a hand-built `protocolClasses`.
    public static func protocolClass(for cache: HTTPCache,
                                     forwardingConfiguration configuration: URLSessionConfiguration = .default) -> AnyClass {
        BindingRegistry.makeClass(for: ProtocolBinding(cache: cache, forwarding: configuration))
    }

    /// True for http and https GET requests this cache did not forward itself.
    ///
    /// Every other method is left to Foundation's own HTTP class, which alone can send an
    /// upload task's body (a custom protocol never sees it) and report upload progress; for
    /// POST, PUT, PATCH and DELETE the entry stored for the same URL is removed here first.
    override open class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https",
              property(forKey: handledKey, in: request) == nil else {
            return false
        }
        let method = request.httpMethod?.uppercased() ?? "GET"
        if method == "GET" { return true }
        if CacheDecision.invalidatingMethods.contains(method) {
            invalidate(for: request, binding: BindingRegistry.binding(for: self))
        }
        return false
    }

    /// Removes the entry an unsafe request's success would make outdated: the GET of its URL,
    /// with its credentials.
    static func invalidate(for request: URLRequest, binding: ProtocolBinding) {
        var read = request
        read.httpMethod = "GET"
        let key = binding.cache.key(for: read, headers: RequestHeaders(read, session: binding.sessionHeaders))
        binding.cache.remove(key, url: request.url)
        binding.cache.emit(.invalidated, key, request.url)
    }

    /// The request unchanged.
    override open class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    override open func startLoading() {
        let delivery = Delivery(protocol: self, client: client)
        self.delivery = delivery
        if task is URLSessionDownloadTask {
            delivery.fail(CachingError.downloadTaskUnsupported)
            return
        }
        let binding = BindingRegistry.binding(for: type(of: self))
        let cache = binding.cache
        let request = self.request
        let url = request.url
        let headers = RequestHeaders(request, session: binding.sessionHeaders)
        let key = cache.key(for: request, headers: headers)
        let entry = (request.httpMethod?.uppercased() ?? "GET") == "GET" ? cache.lookup(key, url: url) : nil

        switch CacheDecision.decide(request: request, headers: headers, entry: entry, now: cache.now(),
                                    configuration: cache.configuration) {
        case .serve(let status, let age, let refresh):
            guard let entry else { return delivery.fail(URLError(.unknown)) } // the decision serves only what exists
            cache.emit(CacheEvent.Kind(status), key, url)
            // Claim the refresh before answering, so a caller that looks at `refreshesInFlight`
            // once answered sees it; the refresh itself runs off this thread.
            if refresh { binding.refresh(key, request: request, headers: headers, previous: entry) }
            delivery.deliver(binding.builtResponses.response(for: entry, status: status, age: age), body: entry.body)
        case .forward(let plan):
            forward(request, headers: headers, key: key, plan: plan, entry: entry, binding: binding, delivery: delivery)
        case .invalidate:
            // Only reached if a subclass lets unsafe methods through `canInit`.
            Self.invalidate(for: request, binding: binding)
            forward(request, headers: headers, key: key, plan: .bypass(), entry: nil, binding: binding, delivery: delivery)
        case .unsatisfiable:
            cache.emit(.miss, key, url)
            delivery.fail(CachingError.notCached)
        }
    }

    override open func stopLoading() {
        delivery?.stop()
    }

    /// Sends a request to the network (conditional on the entry if the plan says so) and
    /// answers the caller with what comes back: a 304 serves the entry as revalidated, a
    /// failure or 5xx serves it as a fallback where allowed, anything else is stored if it
    /// may be (a GET whose response may not be stored is reported as a bypass).
    private func forward(_ request: URLRequest, headers: RequestHeaders, key: CacheKey, plan: ForwardPlan,
                         entry: CacheEntry?, binding: ProtocolBinding, delivery: Delivery) {
        let cache = binding.cache
        let url = request.url
        let validating = plan.validate ? entry : nil
        let fallback = plan.fallback ? entry : nil
        if entry != nil && plan.status == .expired && validating == nil && fallback == nil {
            cache.remove(key, url: url) // past every window, no validator: of no more use
        }
        @Sendable func serve(_ entry: CacheEntry, as status: CacheStatus) {
            cache.emit(CacheEvent.Kind(status), key, url)
            delivery.deliver(Self.response(for: entry, status: status, age: cache.age(of: entry, for: request)), body: entry.body)
        }
        binding.fetch(ProtocolBinding.forwardingRequest(from: request, validating: validating),
                      started: { delivery.attach($0) }) { data, response, error in
            if (error as? URLError)?.code == .cancelled {
                return delivery.fail(error!) // the caller cancelled (a no-op then): no fallback, no event
            }
            guard error == nil, let http = response as? HTTPURLResponse else {
                if let fallback { return serve(fallback, as: .fallback) }
                cache.emit(CacheEvent.Kind(plan.status), key, url)
                delivery.fail(error ?? URLError(.badServerResponse))
                return
            }
            if http.statusCode == 304, let validating {
                return serve(cache.revalidate(validating, with: http), as: .revalidated)
            }
            if http.statusCode >= 500, let fallback { return serve(fallback, as: .fallback) }
            let body = data ?? Data()
            let storable = plan.store && cache.isStorable(http, for: request, headers: headers)
            let served = storable ? plan.status : .bypass
            cache.emit(CacheEvent.Kind(served), key, url)
            if storable {
                cache.record(http, body: body, for: request, headers: headers, key: key)
            } else if validating != nil || fallback != nil {
                cache.remove(key, url: url) // replaced by a response that may not be stored
            }
            delivery.deliver(Self.response(from: http, status: served), body: body)
        }
    }

    /// A response built from a stored entry, with `Age` and the cache-status header.
    static func response(for entry: CacheEntry, status: CacheStatus, age: TimeInterval) -> HTTPURLResponse {
        var headers = entry.headers
        headers["Age"] = String(Int(age))
        headers[HTTPCachingHeaders.status] = status.rawValue
        return HTTPURLResponse(url: entry.url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers)!
    }

    /// The network's response with the cache-status header added.
    static func response(from response: HTTPURLResponse, status: CacheStatus) -> HTTPURLResponse {
        var headers = response.headerFields
        headers[HTTPCachingHeaders.status] = status.rawValue
        return HTTPURLResponse(url: response.url!, statusCode: response.statusCode, httpVersion: "HTTP/1.1",
                               headerFields: headers) ?? response
    }
}

/// Errors the cache itself reports to a task.
public enum CachingError: Error, LocalizedError, Equatable {
    /// A download task reached the cache; custom protocols cannot serve download tasks on
    /// Linux. Use a data task on a caching session.
    case downloadTaskUnsupported
    /// The request forbade the network (`Cache-Control: only-if-cached`, or the cache-only
    /// policy) and nothing stored may answer it: HTTP's 504 for only-if-cached.
    case notCached

    /// What went wrong, in a sentence.
    public var errorDescription: String? {
        switch self {
        case .downloadTaskUnsupported:
            "download tasks cannot be served through CachingURLProtocol on Linux; use a data task"
        case .notCached:
            "no stored response may answer this request, and it forbids the network (only-if-cached)"
        }
    }
}

extension URLSessionConfiguration {
    /// Installs caching: puts a caching protocol class bound to `cache` first in
    /// `protocolClasses` and sets `urlCache` to nil, keeping a copy of these settings as they
    /// were (headers, timeouts, cookie storage, other protocol classes) for the requests the
    /// cache forwards, so they carry exactly what they carried before.
    ///
    /// Call it once per configuration you make sessions from: each call makes a protocol
    /// class and a forwarding session that live for the rest of the process. Settings
    /// changed after the call do not reach forwarded requests. Calling it again replaces
    /// the earlier installation.
    /// - Parameter cache: the cache to answer from. The default is `HTTPCache.shared`.
    public func enableHTTPCaching(_ cache: HTTPCache = .shared) {
        let others = (protocolClasses ?? []).filter { !($0 is CachingURLProtocol.Type) }
        let original = copy() as! URLSessionConfiguration
        original.protocolClasses = others
        protocolClasses = [CachingURLProtocol.protocolClass(for: cache, forwardingConfiguration: original)] + others
        urlCache = nil
    }
}
