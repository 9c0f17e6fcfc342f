import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a protocol can learn about its task beyond the public API, read from
/// swift-corelibs-foundation's stored properties (read-only, `StoredField`).
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

    /// Whether the task was made by an async method (`data(for:)`, `upload(for:from:)`, with or
    /// without a delegate), which completes it inline; true when it cannot be read.
    static func isMadeByAsyncMethod(_ task: URLSessionTask) -> Bool {
        storedValue(named: "_callCompletionHandlerInline", in: task) as? Bool ?? true
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

    /// The delegate asked about `task`'s redirects, challenges and body stream: `task.delegate`
    /// (its own, else the session's), as Foundation asks; when there is none, the one given to
    /// `data(for:delegate:)` (kept only in the session's registry, where `task.delegate` does
    /// not look), as Darwin asks it. Call it on the task's work queue.
    static func delegate(of task: URLSessionTask, session: URLSession?) -> URLSessionTaskDelegate? {
        registration(of: task, session: session).delegate
    }

    /// The delegate Foundation reports a task's upload progress to: the session's delegate for
    /// a task without a completion handler, the one given to `data(for:delegate:)` or
    /// `upload(for:from:delegate:)`, none for a completion-handler task. When the registry
    /// cannot be read, `task.delegate`. Call it on the task's work queue.
    static func progressDelegate(of task: URLSessionTask, session: URLSession?) -> URLSessionTaskDelegate? {
        registration(of: task, session: session).progressDelegate
    }

    /// The delegate a `...WithTaskDelegate` behaviour carries, if any.
    private static func givenDelegate(_ behaviour: (name: String, value: Any)) -> URLSessionTaskDelegate? {
        guard behaviour.name == "dataCompletionHandlerWithTaskDelegate",
              let payload = Mirror(reflecting: behaviour.value).children.first?.value else { return nil }
        let parts = Mirror(reflecting: payload).children.map(\.value)
        guard parts.count == 2 else { return nil }
        return unwrap(parts[1]) as? URLSessionTaskDelegate
    }

    /// What the session registered for a task, read once: how it takes its body, the
    /// delegate Foundation would ask about it, and the one it reports upload progress to. Call
    /// it on the task's work queue.
    struct Registration {
        var delivery: Delivery?
        /// Asked about redirects, challenges and body streams (`delegate(of:session:)`).
        var delegate: URLSessionTaskDelegate?
        /// Asked before storing (`willCacheResponse`): the one given to `data(for:delegate:)`
        /// first, as Darwin asks a task's own delegate first.
        var storingDelegate: URLSessionTaskDelegate?
        var progressDelegate: URLSessionTaskDelegate?
        /// A data task's data delegate given to `data(for:delegate:)` (or an upload method's):
        /// Foundation's own HTTP class hands it every chunk.
        var chunkDelegate: URLSessionDataDelegate?
        /// Whether a completion handler takes the answer (`dataTask(with:completionHandler:)`,
        /// `async data(for:)`): Foundation's own HTTP class then hands its client the body whole.
        var completionHandler = false
    }

    /// The task's registration, in one read of the registry (`delivery(of:session:)` reads it
    /// on its own; `delegate(of:session:)` and `progressDelegate(of:session:)` are its parts).
    static func registration(of task: URLSessionTask, session: URLSession?) -> Registration {
        guard let session, let behaviour = behaviour(of: task, session: session) else {
            return Registration(delivery: nil, delegate: task.delegate, storingDelegate: task.delegate, progressDelegate: task.delegate)
        }
        var registration = Registration()
        let given = givenDelegate(behaviour) // two Mirror walks: once
        switch behaviour.name {
        case "callDelegate":
            registration.delivery = session.delegate is URLSessionDataDelegate ? .delegate : .whole
            registration.progressDelegate = session.delegate as? URLSessionTaskDelegate
        case "dataCompletionHandler":
            registration.delivery = .whole
            registration.completionHandler = true
        case "dataCompletionHandlerWithTaskDelegate":
            registration.delivery = .whole
            registration.completionHandler = true
            registration.progressDelegate = given
            registration.chunkDelegate = chunkDelegate(of: task, given: given)
        default:
            break
        }
        registration.delegate = task.delegate ?? given
        registration.storingDelegate = given ?? task.delegate
        return registration
    }

    /// The data delegate given to `data(for:delegate:)` (or an upload method's) for a data
    /// task, read alone: one registry lookup, no more (what a hit needs).
    static func chunkDelegate(of task: URLSessionTask, session: URLSession) -> URLSessionDataDelegate? {
        guard task is URLSessionDataTask, let behaviour = behaviour(of: task, session: session) else { return nil }
        return chunkDelegate(of: task, given: givenDelegate(behaviour))
    }

    /// A data task's given delegate when it is a data delegate (what gets the chunks).
    private static func chunkDelegate(of task: URLSessionTask, given: URLSessionTaskDelegate?) -> URLSessionDataDelegate? {
        task is URLSessionDataTask ? given as? URLSessionDataDelegate : nil
    }

    /// The name of the behaviour the session registered for a task (its enum case), and the
    /// behaviour itself.
    private static func behaviour(of task: URLSessionTask, session: URLSession) -> (name: String, value: Any)? {
        guard let registry = storedValue(named: "taskRegistry", in: session),
              let behaviours = storedValue(named: "behaviours", in: registry as AnyObject),
              let table = behaviours as? any IntKeyedTable else { return nil }
        // One entry looked up in place (a cast to [Int: Any] would box every task's entry), and
        // its case named as `print` names it (a Mirror costs far more).
        guard let found = table.anyValue(for: task.taskIdentifier), let name = caseName(of: found) else { return nil }
        return (name, found)
    }

    /// The case name of an enum value held as `Any` (`EnumCaseNames`); nil for any other value.
    private static func caseName(of value: Any) -> String? {
        func name<T>(_ value: T) -> String? { EnumCaseNames.name(of: value) }
        return _openExistential(value, do: name)
    }

    /// Foundation's own protocol a task's `_protocolStorage` holds, when it is `existing`.
    private static func foundationProtocol(in storage: Any) -> URLProtocol? {
        guard let existing = Mirror(reflecting: storage).children.first, existing.label == "existing" else { return nil }
        return existing.value as? URLProtocol
    }

    /// Whether Foundation's own HTTP class running `task` has ended its transfer: the task let
    /// its protocol go (`_protocolStorage` is `invalidated`, once the end is reported), or the
    /// protocol's `internalState` is `transferCompleted`, `transferFailed` or `taskCompleted`.
    /// The task's delegate may not have heard of the end yet. Read it on the session's transfer
    /// queue, where both change; nil when it cannot be read.
    static func transferEnded(_ task: URLSessionTask) -> Bool? {
        guard let storage = storedValue(named: "_protocolStorage", in: task), let storageCase = caseName(of: storage) else { return nil }
        if storageCase == "invalidated" { return true }
        guard let foundationProtocol = foundationProtocol(in: storage),
              let state = storedValue(named: "internalState", in: foundationProtocol),
              let stateCase = caseName(of: state) else { return nil }
        switch stateCase {
        case "transferCompleted", "transferFailed", "taskCompleted": return true
        default: return false
        }
    }

    /// The whole body Foundation's own HTTP class has loaded for a completion-handler task that
    /// has not completed yet: a 401's (its protocol's `responseData`, set just before it raises
    /// an authentication challenge), or a redirect's (`lastRedirectBody`, while its delegate is
    /// asked whether to follow); nil when it cannot be read.
    static func loadedBody(of task: URLSessionTask, redirect: Bool) -> Data? {
        guard let storage = storedValue(named: "_protocolStorage", in: task),
              let foundationProtocol = foundationProtocol(in: storage) else { return nil }
        if redirect { return storedValue(named: "lastRedirectBody", in: foundationProtocol).flatMap(unwrap) as? Data }
        guard let properties = storedValue(named: "properties", in: foundationProtocol) else { return nil }
        for entry in Mirror(reflecting: properties).children {
            let pair = Mirror(reflecting: entry.value).children.map(\.value)
            if pair.count == 2, String(describing: pair[0]) == "responseData" { return pair[1] as? Data }
        }
        return nil
    }

    /// How many redirects Foundation's own HTTP class has followed for one of its objects (its
    /// private `redirectCount`: a redirect back to the same URL leaves no other trace); nil when
    /// it cannot be read.
    static func redirectCount(of foundationProtocol: URLProtocol) -> Int? {
        storedValue(named: "redirectCount", in: foundationProtocol) as? Int
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

    /// A stored property of an object, read through `StoredField`.
    private static func storedValue(named name: String, in object: AnyObject) -> Any? {
        StoredField.value(named: name, in: object)
    }

    /// The value inside an optional (nil for `.none`), or the value itself.
    private static func unwrap(_ value: Any) -> Any? {
        guard let optional = value as? any OptionalValue else { return value }
        return optional.wrappedValue
    }
}

/// A dictionary keyed by `Int`, whatever its values: one entry read without naming their type.
protocol IntKeyedTable {
    func anyValue(for key: Int) -> Any?
}

extension Dictionary: IntKeyedTable where Key == Int {
    func anyValue(for key: Int) -> Any? { self[key] }
}

/// An optional, whatever it wraps: its value read without naming the type.
protocol OptionalValue {
    var wrappedValue: Any? { get }
}

extension Optional: OptionalValue {
    var wrappedValue: Any? { self.map { $0 } }
}
