import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a protocol can learn about its task beyond the public API, read from
/// swift-corelibs-foundation's stored properties with `Mirror` (read-only).
///
/// On Linux a protocol cannot see its task's session (`URLSessionTask.session` is internal),
/// whether the task was made with a completion handler (the session's task registry is
/// internal), or an upload task's body (`knownBody` is internal). Each reading here is pinned
/// by a test in `LinuxFoundationFactsTests`; when one cannot be made, the answer is nil and the
/// cache falls back to what is safe without it.
enum TaskIntrospection {
    /// The session a task belongs to.
    static func session(of task: URLSessionTask) -> URLSession? {
        guard let value = storedValue(named: "session", in: task) else { return nil }
        return unwrap(value) as? URLSession
    }

    /// The serial queue the task's work runs on (`startLoading`, `stopLoading`, `cancel()`,
    /// `suspend()`, and Foundation's own HTTP class's client calls); the session's task
    /// registry may only be read there.
    static func workQueue(of task: URLSessionTask) -> DispatchQueue? {
        storedValue(named: "workQueue", in: task).flatMap(unwrap) as? DispatchQueue
    }

    /// The serial queue a session's transfers run on (its libcurl multi handle's
    /// `MultiHandle.isolation`, under the session's work queue): every socket read happens in a
    /// block there, so while a fast transfer runs, a block queued on it takes turns with the
    /// reads, where one queued on a work queue waits for the whole transfer.
    static func transferQueue(of session: URLSession) -> DispatchQueue? {
        guard let handle = storedValue(named: "multiHandle", in: session).flatMap(unwrap) as AnyObject?,
              let queue = storedValue(named: "queue", in: handle).flatMap(unwrap) as? DispatchQueue else { return nil }
        return queue
    }

    /// The file Foundation's own HTTP class writes a download task's body to (its lazily made
    /// `tempFileURL`), once made; nil before, or when it cannot be read.
    static func downloadFile(of foundationProtocol: URLProtocol) -> URL? {
        storedValue(named: "$__lazy_storage_$_tempFileURL", in: foundationProtocol).flatMap(unwrap) as? URL
    }

    /// How a task receives its body, by the behaviour its session registered for it.
    enum Delivery: Equatable {
        /// Chunk by chunk through the delegate's `didReceive(data)` (`.callDelegate` with a
        /// data delegate).
        case delegate
        /// Once, at the end, through a completion handler (`dataTask(with:completionHandler:)`,
        /// `async data(for:)`), or not at all (no data delegate): the body must reach the
        /// client in one `didLoad` call, which replaces what came before.
        case whole
    }

    /// How `task` receives its body; nil if it cannot be read. Call it on the task's work
    /// queue (`startLoading` runs there): the registry is only consistent there.
    static func delivery(of task: URLSessionTask, session: URLSession) -> Delivery? {
        guard let behaviour = behaviour(of: task, session: session) else { return nil }
        switch behaviour.name {
        case "callDelegate":
            return session.delegate is URLSessionDataDelegate ? .delegate : .whole
        case "dataCompletionHandler", "dataCompletionHandlerWithTaskDelegate":
            return .whole
        default:
            return nil
        }
    }

    /// The delegate Foundation would ask about `task`'s redirects, challenges and body
    /// stream: the one given to `data(for:delegate:)` (kept only in the session's registry,
    /// where `task.delegate` does not look), else `task.delegate`. Call it on the task's work
    /// queue.
    static func delegate(of task: URLSessionTask, session: URLSession?) -> URLSessionTaskDelegate? {
        if let session, let behaviour = behaviour(of: task, session: session), let delegate = givenDelegate(behaviour) {
            return delegate
        }
        return task.delegate
    }

    /// The delegate Foundation reports a task's upload progress to: the session's delegate for
    /// a task without a completion handler, the one given to `data(for:delegate:)` or
    /// `upload(for:from:delegate:)`, none for a completion-handler task. When the registry
    /// cannot be read, `task.delegate`. Call it on the task's work queue.
    static func progressDelegate(of task: URLSessionTask, session: URLSession?) -> URLSessionTaskDelegate? {
        guard let session, let behaviour = behaviour(of: task, session: session) else { return task.delegate }
        switch behaviour.name {
        case "callDelegate": return session.delegate as? URLSessionTaskDelegate
        case "dataCompletionHandlerWithTaskDelegate": return givenDelegate(behaviour)
        default: return nil
        }
    }

    /// The delegate a `...WithTaskDelegate` behaviour carries, if any.
    private static func givenDelegate(_ behaviour: (name: String, payload: Any?)) -> URLSessionTaskDelegate? {
        guard behaviour.name == "dataCompletionHandlerWithTaskDelegate", let payload = behaviour.payload else { return nil }
        let parts = Mirror(reflecting: payload).children.map(\.value)
        guard parts.count == 2 else { return nil }
        return unwrap(parts[1]) as? URLSessionTaskDelegate
    }

    /// What the session registered for a task, read once: how it takes its body, the
    /// delegate Foundation would ask about it, and the one it reports upload progress to. Call
    /// it on the task's work queue.
    struct Registration {
        var delivery: Delivery?
        var delegate: URLSessionTaskDelegate?
        var progressDelegate: URLSessionTaskDelegate?
    }

    /// The task's registration (one read of the registry, where `delivery(of:session:)`,
    /// `delegate(of:session:)` and `progressDelegate(of:session:)` read it once each).
    static func registration(of task: URLSessionTask, session: URLSession?) -> Registration {
        guard let session, let behaviour = behaviour(of: task, session: session) else {
            return Registration(delivery: nil, delegate: task.delegate, progressDelegate: task.delegate)
        }
        var registration = Registration()
        switch behaviour.name {
        case "callDelegate":
            registration.delivery = session.delegate is URLSessionDataDelegate ? .delegate : .whole
            registration.progressDelegate = session.delegate as? URLSessionTaskDelegate
        case "dataCompletionHandler":
            registration.delivery = .whole
        case "dataCompletionHandlerWithTaskDelegate":
            registration.delivery = .whole
            registration.progressDelegate = givenDelegate(behaviour)
        default:
            break
        }
        registration.delegate = givenDelegate(behaviour) ?? task.delegate
        return registration
    }

    /// The name of the behaviour the session registered for a task, and its payload.
    private static func behaviour(of task: URLSessionTask, session: URLSession) -> (name: String, payload: Any?)? {
        guard let registry = storedValue(named: "taskRegistry", in: session),
              let behaviours = storedValue(named: "behaviours", in: registry as AnyObject) else { return nil }
        // The dictionary cast boxes each value, far cheaper than reflecting every entry.
        if let table = behaviours as? [Int: Any] {
            guard let found = table[task.taskIdentifier] else { return nil }
            let behaviour = Mirror(reflecting: found).children.first
            return (behaviour?.label ?? String(describing: found), behaviour?.value)
        }
        for child in Mirror(reflecting: behaviours).children {
            let pair = Mirror(reflecting: child.value).children.map(\.value)
            guard pair.count == 2, let identifier = pair[0] as? Int, identifier == task.taskIdentifier else { continue }
            let behaviour = Mirror(reflecting: pair[1]).children.first
            return (behaviour?.label ?? String(describing: pair[1]), behaviour?.value)
        }
        return nil
    }

    /// The whole body Foundation's own HTTP class has loaded for a completion-handler task that
    /// has not completed yet: a 401's (its protocol's `responseData`, set just before it raises
    /// an authentication challenge), or a redirect's (`lastRedirectBody`, while its delegate is
    /// asked whether to follow); nil when it cannot be read.
    static func loadedBody(of task: URLSessionTask, redirect: Bool) -> Data? {
        guard let storage = storedValue(named: "_protocolStorage", in: task),
              let existing = Mirror(reflecting: storage).children.first, existing.label == "existing",
              let foundationProtocol = existing.value as? URLProtocol else { return nil }
        if redirect { return storedValue(named: "lastRedirectBody", in: foundationProtocol).flatMap(unwrap) as? Data }
        guard let properties = storedValue(named: "properties", in: foundationProtocol) else { return nil }
        for entry in Mirror(reflecting: properties).children {
            let pair = Mirror(reflecting: entry.value).children.map(\.value)
            if pair.count == 2, String(describing: pair[0]) == "responseData" { return pair[1] as? Data }
        }
        return nil
    }

    /// An upload task's body, kept apart from its request.
    enum UploadBody {
        case none
        case data(Data)
        case file(URL)
        case stream(InputStream)
        /// `uploadTask(withStreamedRequest:)`: the delegate supplies the stream when asked.
        case fromDelegate
    }

    /// The body of an upload task; nil if it cannot be read.
    static func uploadBody(of task: URLSessionTask) -> UploadBody? {
        guard let value = storedValue(named: "knownBody", in: task) else { return nil }
        guard let body = unwrap(value) else { return .fromDelegate }
        let mirror = Mirror(reflecting: body)
        guard let child = mirror.children.first else {
            return String(describing: body) == "none" ? UploadBody.none : nil
        }
        switch child.label {
        case "data":
            if let dispatch = child.value as? DispatchData { return .data(Data(dispatch)) }
            return (child.value as? Data).map(UploadBody.data)
        case "file":
            return (child.value as? URL).map(UploadBody.file)
        case "stream":
            return (child.value as? InputStream).map(UploadBody.stream)
        default:
            return nil
        }
    }

    /// Where a stored property sits in a class's reflection: how many superclass steps up,
    /// and its position among that class's stored properties. Found once per class and name:
    /// finding it walks (and reflects) every property before it, the costly part of a read.
    private struct FieldPosition: Hashable {
        let level: Int
        let offset: Int
    }

    private static let positions = Mutex<[String: FieldPosition]>([:])

    /// A stored property of an object, searched up its class hierarchy; its position is
    /// remembered per class, so later reads reflect that one property (checked by its label).
    private static func storedValue(named name: String, in object: AnyObject) -> Any? {
        let cacheKey = "\(ObjectIdentifier(type(of: object)).hashValue):\(name)"
        if let known = positions.withLock({ $0[cacheKey] }) {
            var mirror: Mirror? = Mirror(reflecting: object)
            for _ in 0..<known.level { mirror = mirror?.superclassMirror }
            if let children = mirror?.children, known.offset < children.count {
                let child = children[children.index(children.startIndex, offsetBy: known.offset)]
                if child.label == name { return child.value }
            }
        }
        var mirror: Mirror? = Mirror(reflecting: object)
        var level = 0
        while let current = mirror {
            for (offset, child) in current.children.enumerated() where child.label == name {
                positions.withLock { $0[cacheKey] = FieldPosition(level: level, offset: offset) }
                return child.value
            }
            mirror = current.superclassMirror
            level += 1
        }
        return nil
    }

    /// The value inside an optional (nil for `.none`), or the value itself.
    private static func unwrap(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        guard mirror.displayStyle == .optional else { return value }
        return mirror.children.first?.value
    }
}
