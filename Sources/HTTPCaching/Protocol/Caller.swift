import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The caller an exchange answers: its task's delivery path, what is known of the task, and
/// what only a caller has (a response held while a redirect or challenge is decided, counts
/// of redirects and challenges, the credential that answered one).
final class Caller: Sendable {
    let delivery: Delivery
    /// Nil only for a protocol made without a task (`init(request:cachedResponse:client:)`).
    let facts: TaskFacts?
    let state = Mutex(State())

    struct State: @unchecked Sendable {
        var held: Held?
        var redirects = 0
        var challenges = 0
        var lastCredential: (space: URLProtectionSpace, credential: URLCredential)?
        var credentialToSave: (space: URLProtectionSpace, credential: URLCredential)?
    }

    /// A response held back from the caller until a redirect or a challenge is decided.
    struct Held {
        enum Kind { case redirect(URLRequest), challenge(Challenges.Challenge) }
        var kind: Kind
        var response: HTTPURLResponse
        var body = Data()
    }

    init(delivery: Delivery, facts: TaskFacts?) {
        self.delivery = delivery
        self.facts = facts
    }

    /// Whether the calling thread is `startLoading`'s, on the task's work queue.
    var onWorkQueue: Bool { delivery.isInline }

    /// The session and the delegate Foundation would ask about the task, if both are known
    /// (read here when still inside `startLoading`, where `prepareForNetwork` may not have run).
    func askable() -> (session: URLSession, delegate: URLSessionTaskDelegate, task: URLSessionTask)? {
        if onWorkQueue { facts?.load() }
        guard let facts, let session = facts.session, let delegate = facts.delegate(onWorkQueue: onWorkQueue) else { return nil }
        return (session, delegate, facts.task)
    }

    /// Before an answer comes from the network: how the task takes its body, and whether its
    /// delegate is asked before storing. Call it on the task's work queue.
    func prepareForNetwork() -> (streaming: Bool, asksBeforeStoring: Bool) {
        guard let facts else { return (false, false) }
        facts.load()
        let streaming = facts.streaming
        if streaming, let session = facts.session { delivery.streamToDelegate(session: session) }
        return (streaming, facts.cacheDelegate != nil)
    }

    /// Body bytes of the answer: held with a held response, else to the caller.
    func load(_ data: Data) {
        let holding = state.withLock { state -> Bool in
            guard state.held != nil else { return false }
            state.held?.body.append(data)
            return true
        }
        if !holding { delivery.load(data) }
    }

    /// Takes the held response, if any.
    func takeHeld() -> Held? {
        state.withLock { state in
            defer { state.held = nil }
            return state.held
        }
    }

    /// Delivers a held response as it is, but for a 401 carrying a challenge nothing answered:
    /// without the field that would make Foundation 6.3.1 start the same challenge itself and
    /// wait forever.
    func deliverHeld(_ held: Held) {
        var response = held.response
        if case .challenge = held.kind {
            var head = ResponseHead(held.response)
            head.headers = head.headers.filter { !$0.key.equalsIgnoringASCIICase("WWW-Authenticate") }
            response = HTTPURLResponse(head)
        }
        delivery.deliver(response, body: held.body)
    }

    /// Gives the task a held 401's head (its challenge field kept) and body, then cancels the
    /// task, whose delegate cancelled or rejected the challenge: it ends cancelled with the 401
    /// as its response, as without the cache (its finish, which would raise the challenge again,
    /// never comes). Foundation's own HTTP class hands the 401 over before it asks the delegate;
    /// the cache holds it until the challenge is answered, so that an answered one never shows
    /// it, and hands it over after.
    func handOverThenCancel(_ held: Held, task: URLSessionTask) {
        delivery.respond(held.response)
        delivery.load(held.body)
        let task = UncheckedBox(task)
        // Cancelling waits for the work queue, where this runs: from another thread.
        delivery.afterDelivered { DispatchQueue.global().async { task.value.cancel() } }
    }

    /// The caller's credential storage: its session's, as Foundation uses it.
    func credentialStorage(binding: ProtocolBinding) -> URLCredentialStorage? {
        if let session = facts?.session { return session.configuration.urlCredentialStorage }
        return binding.credentialStorage.value
    }

    /// After an answer that needed a credential, keeps it in the caller's credential storage,
    /// as Foundation does.
    func saveCredentialIfUsed(binding: ProtocolBinding) {
        guard let saved = state.withLock({ state -> (space: URLProtectionSpace, credential: URLCredential)? in
            defer { state.credentialToSave = nil }
            return state.credentialToSave
        }), let storage = credentialStorage(binding: binding), let task = facts?.task else { return }
        storage.set(saved.credential, for: saved.space, task: task)
    }
}
