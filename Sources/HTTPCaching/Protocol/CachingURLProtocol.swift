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
/// settings for forwarded requests; `protocolClass(for:forwardingConfiguration:)` makes a
/// class bound to a cache of your own.
///
/// Every method is handled: GET and HEAD are answered from the cache when they can be; other
/// methods go to the network through the cache, so their answers can invalidate what is
/// stored. Download tasks cannot be served by a custom protocol on Linux
/// (swift-corelibs-foundation crashes delivering to them); on a caching session they fail at
/// once with `CachingError.downloadTaskUnsupported`.
public class CachingURLProtocol: URLProtocol {
    /// The protocol property that marks a request this cache forwarded.
    static let handledKey = "HTTPCaching.handled"

    private var exchange: Exchange?

    /// A protocol class bound to a cache, forwarding with a copy of `configuration`'s
    /// settings, for `URLProtocol.registerClass` or a hand-built `protocolClasses`. Each call
    /// makes a class that lives for the rest of the process: prefer `enableHTTPCaching(_:)`.
    public static func protocolClass(for cache: HTTPCache,
                                     forwardingConfiguration configuration: URLSessionConfiguration = .default) -> AnyClass {
        BindingRegistry.makeClass(for: ProtocolBinding(cache: cache, forwarding: configuration), permanent: true)
    }

    /// True for http and https requests this cache did not forward itself.
    override public class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https",
              property(forKey: handledKey, in: request) == nil else {
            return false
        }
        return true
    }

    /// The request unchanged.
    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// Answers from the cache or starts the forwarded request. Runs on Foundation's shared
    /// URLSession queue: no store I/O happens here unless the store answers from memory.
    override public func startLoading() {
        let delivery = Delivery(protocol: self, client: client)
        delivery.inline {
            if task is URLSessionDownloadTask {
                return delivery.fail(CachingError.downloadTaskUnsupported)
            }
            let session = BindingRegistry.needsSessionCheck(type(of: self)) ? task.flatMap(TaskIntrospection.session(of:)) : nil
            guard let binding = BindingRegistry.binding(for: type(of: self), session: session) else {
                return delivery.fail(CachingError.installationReleased)
            }
            let exchange = Exchange(request: request, task: task, session: session, binding: binding, delivery: delivery)
            self.exchange = exchange
            exchange.begin()
        }
    }

    /// Stops answering: nothing reaches the client any more.
    override public func stopLoading() {
        exchange?.stop()
    }
}

/// Errors the cache itself reports to a task.
public enum CachingError: Error, LocalizedError, Equatable, Sendable {
    /// A download task reached the cache; custom protocols cannot serve download tasks on
    /// Linux. Use a data task on a caching session.
    case downloadTaskUnsupported
    /// The request forbade the network (`Cache-Control: only-if-cached`, or the cache-only
    /// policy) and nothing stored may answer it: HTTP's 504 for only-if-cached.
    case notCached
    /// The request names a policy (`URLRequest.cachingPolicy`) the cache does not know:
    /// neither built in, nor the configuration's, nor one of its `customPolicies`.
    case unknownPolicy(String)
    /// An upload task's body could not be read from the task, so it was not sent at all
    /// (rather than sent empty).
    case uploadBodyUnavailable
    /// A redirect or a retry with credentials needed the store's partition secret, and the
    /// store could not give it.
    case storeUnavailableForCredentials
    /// The installation this protocol class belonged to was released with its sessions, or
    /// the session's configuration no longer carries it (its `urlCache` was replaced after
    /// `enableHTTPCaching`).
    case installationReleased

    /// What went wrong, in a sentence.
    public var errorDescription: String? {
        switch self {
        case .downloadTaskUnsupported:
            "download tasks cannot be served through CachingURLProtocol on Linux; use a data task"
        case .notCached:
            "no stored response may answer this request, and it forbids the network (only-if-cached)"
        case .unknownPolicy(let name):
            "the request names the caching policy \(name), which this cache does not know"
        case .uploadBodyUnavailable:
            "the upload task's body could not be read, so the request was not sent"
        case .storeUnavailableForCredentials:
            "the store could not give the secret that partitions credentialed entries"
        case .installationReleased:
            "the caching installation of this session's configuration was released"
        }
    }
}
