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
/// settings for forwarded requests (`defaultInstallation`);
/// `installation(for:forwardingConfiguration:)` makes a class bound to a cache of your own.
///
/// Every method is handled: GET and HEAD are answered from the cache when they can be; other
/// methods go to the network through the cache, so their answers can invalidate what is
/// stored. Download tasks run on Foundation's own HTTP class (a custom protocol cannot hand a
/// file to a download task on Linux); what they download is stored when it is storable.
public class CachingURLProtocol: URLProtocol {
    /// The protocol property that marks a request this cache forwarded.
    static let handledKey = "HTTPCaching.handled"

    /// What answers the task, made by the first `startLoading`. Only read and written on the
    /// task's work queue, where Foundation calls `startLoading` and `stopLoading`.
    private var route: Route?

    private enum Route {
        /// The cache's own exchange (data and upload tasks).
        case exchange(Exchange)
        /// Foundation's own HTTP class on the caller's task (download tasks).
        case foundation(FoundationHandOff)
        /// Failed at once; nothing more happens.
        case failed
    }

    /// An installation with a protocol class of its own bound to `cache`, forwarding with a
    /// copy of `configuration`'s settings, for `URLProtocol.registerClass` or a hand-built
    /// `protocolClasses` (its `protocolClass`). Each call makes a class that lives for the
    /// rest of the process: prefer `enableHTTPCaching(_:)`.
    /// - Parameter configuration: the settings forwarded requests go out with. The default is
    ///   `.default`.
    public static func installation(for cache: HTTPCache,
                                    forwardingConfiguration configuration: URLSessionConfiguration = .default) -> CacheInstallation {
        let binding = ProtocolBinding(cache: cache, forwarding: configuration)
        return CacheInstallation(binding: binding, protocolClass: BindingRegistry.makeClass(for: binding, permanent: true))
    }

    /// The installation `CachingURLProtocol.self` itself answers for when registered with
    /// `URLProtocol.registerClass` or put in `protocolClasses` by hand: `HTTPCache.shared`,
    /// forwarding with the `.default` configuration's settings.
    public static let defaultInstallation = CacheInstallation(binding: BindingRegistry.defaultBinding,
                                                              protocolClass: CachingURLProtocol.self)

    /// True for http and https requests this cache did not forward itself.
    override public class func canInit(with request: URLRequest) -> Bool {
        // As Foundation's own HTTP class: the scheme as written (it refuses `HTTP:` as an unsupported URL).
        guard let scheme = request.url?.scheme, scheme == "http" || scheme == "https",
              property(forKey: handledKey, in: request) == nil else {
            return false
        }
        return true
    }

    /// The request unchanged.
    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// Answers from the cache or starts the forwarded request; for a download task, starts
    /// Foundation's own HTTP class on it. Runs on the task's work queue, under Foundation's
    /// shared URLSession queue: no store I/O happens here unless the store answers from memory.
    ///
    /// Foundation calls it again on `resume()` of a running task (Alamofire's `cancel()` does
    /// that) and after `suspend()`: the task keeps its one exchange, which goes on.
    override public func startLoading() {
        switch route {
        case .exchange(let exchange)?: return exchange.resume()
        case .foundation(let handOff)?: return handOff.start()
        case .failed?: return
        case nil: break
        }
        // Cancelled or suspended before this queued start ran: nothing goes out. A later
        // `resume()` starts it again.
        if let task, task.state != .running { return }
        let delivery = Delivery(protocol: self, client: client)
        delivery.inline {
            let session = BindingRegistry.needsSessionCheck(type(of: self)) ? task.flatMap(TaskIntrospection.session(of:)) : nil
            guard let binding = BindingRegistry.binding(for: type(of: self), session: session) else {
                route = .failed
                return delivery.fail(HTTPCachingError.installationReleased)
            }
            if let task, task is URLSessionDownloadTask, let client,
               let handOff = FoundationHandOff(task: task, client: client, binding: binding) {
                route = .foundation(handOff)
                return handOff.start()
            }
            let exchange = Exchange(request: request, task: task, session: session, binding: binding, delivery: delivery)
            route = .exchange(exchange)
            exchange.begin()
        }
    }

    /// Stops answering on `cancel()`: nothing reaches the client any more, and the request in
    /// flight is cancelled unless other requests wait for its answer. On `suspend()` the
    /// answer waits for `resume()`; the request in flight goes on (sending it again would send
    /// an unsafe method twice).
    override public func stopLoading() {
        let suspending = task?.state == .suspended
        switch route {
        case .exchange(let exchange)?: if !suspending { exchange.stop() }
        case .foundation(let handOff)?: suspending ? handOff.suspend() : handOff.stop()
        case .failed?, nil: break
        }
    }
}

