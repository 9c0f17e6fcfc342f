import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request of an exchange: the caller's, or one it led to (a redirect, a retry with
/// credentials), with its key derived once.
struct Hop: Sendable {
    var request: URLRequest
    /// Its fields as they reach the network (the session's own headers included).
    var headers: RequestHeaders
    var key: CacheKey
    var credentialed: Bool
    var body: HopBody
    /// The digest its body adds to its key, when its body is keyed (`BodyKeying`).
    var bodyDigest: String?

    /// A hop for `request` under `binding`'s keys; its key is the URL's until `key` is set.
    init(_ request: URLRequest, body: HopBody = .none, binding: ProtocolBinding) {
        self.request = request
        headers = binding.keys.headers(request)
        key = CacheKey(url: request.url ?? URL(fileURLWithPath: "/"))
        credentialed = binding.keys.isCredentialed(headers)
        self.body = body
    }

    /// The request as it goes to the network: marked as handled, private fields removed, made
    /// conditional with `conditional`, never answered from Foundation's own cache.
    static func forwardingRequest(from request: URLRequest, conditional: [String: String]) -> URLRequest {
        let mutable = (request as NSURLRequest).mutableCopy() as! NSMutableURLRequest
        // Removing a field rebuilds the request's fields: only those present are removed.
        let present = Set((request.allHTTPHeaderFields ?? [:]).keys.map { $0.lowercased() })
        for name in HTTPCachingHeaders.allPrivate where present.contains(name.lowercased()) {
            mutable.setValue(nil, forHTTPHeaderField: name)
        }
        for (name, value) in conditional { mutable.setValue(value, forHTTPHeaderField: name) }
        mutable.cachePolicy = .reloadIgnoringLocalCacheData
        mutable.httpBody = nil
        mutable.httpBodyStream = nil
        URLProtocol.setProperty(true, forKey: CachingURLProtocol.handledKey, in: mutable)
        var forwarded = mutable as URLRequest
        // The copy loses whether the caller set its own timeout: set, it applies, as without the cache.
        if RequestTimeout.isSet(request) { forwarded.timeoutInterval = request.timeoutInterval }
        return forwarded
    }
}

/// The body a hop sends.
enum HopBody: @unchecked Sendable {
    case none
    case data(Data)
    case file(URL)
    case stream(InputStream)
    /// A request's own stream, read to key it: its bytes, sent as a stream again each time, so
    /// Foundation frames and types them as without the cache (chunked; a form type for a `POST`
    /// without one).
    case readStream(Data)
    /// Not known yet: the caller's delegate supplies it (`needNewBodyStream`).
    case fromDelegate
    /// What the caller's delegate supplied: sent as Foundation sends a streamed upload's body.
    case delegateStream(InputStream)

    /// The body a task sends: an upload task's own, read from the task (Foundation sends it,
    /// not the request's), else the request's; nil when an upload task's body cannot be read
    /// (it is then not sent at all, rather than empty).
    init?(of request: URLRequest, task: URLSessionTask?) {
        if let task, task is URLSessionUploadTask {
            switch TaskIntrospection.uploadBody(of: task) {
            case .none?: self = .none
            case .data(let data)?: self = .data(data)
            case .file(let url)?: self = .file(url)
            case .stream(let stream)?: self = .stream(stream)
            case .fromDelegate?: self = .fromDelegate
            case nil: return nil
            }
        } else if let data = request.httpBody {
            self = .data(data)
        } else if let stream = request.httpBodyStream {
            self = .stream(stream)
        } else {
            self = .none
        }
    }

    /// The error Foundation's own HTTP class fails a `GET` with before sending anything when
    /// the task carries a body: for a data task a non-empty `httpBody` or a stream, for an
    /// upload task its data, file or stream (not the request's, which it ignores; a streamed
    /// upload's body comes from the delegate later and is not refused here); nil for any other
    /// request. A `URLError`, built as Foundation builds it.
    static func refusal(of request: URLRequest, task: URLSessionTask?) -> URLError? {
        guard request.httpMethod == "GET" else { return nil }
        switch HopBody(of: request, task: task) {
        case .data(let data)?:
            // Foundation takes an empty `httpBody` for none; an upload task's data, even empty, is a body.
            guard !data.isEmpty || task is URLSessionUploadTask else { return nil }
        case .file?, .stream?:
            break
        default:
            return nil
        }
        let failingString = "NSErrorFailingURLStringKey" // NSURLErrorFailingURLStringErrorKey, deprecated
        let description = "resource exceeds maximum size"
        let underlying = NSError(domain: NSURLErrorDomain, code: NSURLErrorDataLengthExceedsMaximum,
                                 userInfo: [NSLocalizedDescriptionKey: description, failingString: request.url?.description ?? ""])
        guard let url = request.url else { return URLError(.dataLengthExceedsMaximum) }
        return URLError(.dataLengthExceedsMaximum, userInfo: [NSUnderlyingErrorKey: underlying, NSURLErrorFailingURLErrorKey: url,
                                                              failingString: url.absoluteString, NSLocalizedDescriptionKey: description])
    }

    /// The bytes it sends, when they are held in memory.
    var bytes: Data? {
        switch self {
        case .data(let data), .readStream(let data): data
        default: nil
        }
    }

    /// The body the same request sends again (after a 307/308 or a 401): a stream is spent, so
    /// the caller's delegate is asked for a new one (`needNewBodyStream`), as Foundation asks.
    var again: HopBody {
        switch self {
        case .stream, .delegateStream: .fromDelegate
        default: self
        }
    }

    /// What the forwarding session sends (a body still to come from the delegate sends none);
    /// `inRequest`: data the request carried (`httpBody`), else an upload task's.
    func forwarded(inRequest: Bool) -> ForwardingSession.Body {
        switch self {
        case .none, .fromDelegate: .none
        case .delegateStream(let stream): .fromDelegate(stream)
        case .data(let data): inRequest ? .data(data) : .upload(data)
        case .file(let url): .file(url)
        case .stream(let stream): .stream(stream)
        case .readStream(let data): .stream(InputStream(data: data))
        }
    }
}
