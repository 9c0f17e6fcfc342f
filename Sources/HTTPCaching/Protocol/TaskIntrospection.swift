import Foundation
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

    /// The name of the behaviour the session registered for a task, and its payload.
    private static func behaviour(of task: URLSessionTask, session: URLSession) -> (name: String, payload: Any?)? {
        guard let registry = storedValue(named: "taskRegistry", in: session),
              let behaviours = storedValue(named: "behaviours", in: registry as AnyObject) else { return nil }
        for child in Mirror(reflecting: behaviours).children {
            let pair = Mirror(reflecting: child.value).children.map(\.value)
            guard pair.count == 2, let identifier = pair[0] as? Int, identifier == task.taskIdentifier else { continue }
            let behaviour = Mirror(reflecting: pair[1]).children.first
            return (behaviour?.label ?? String(describing: pair[1]), behaviour?.value)
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

    /// A stored property of an object, searched up its class hierarchy.
    private static func storedValue(named name: String, in object: AnyObject) -> Any? {
        var mirror: Mirror? = Mirror(reflecting: object)
        while let current = mirror {
            if let child = current.children.first(where: { $0.label == name }) { return child.value }
            mirror = current.superclassMirror
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
