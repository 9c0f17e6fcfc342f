import Foundation
import Synchronization

/// Something the cache did, with the key and URL it concerned.
public struct CacheEvent: Sendable, CustomStringConvertible {
    /// What happened.
    ///
    /// A struct with static members rather than an enum, so kinds can be added without
    /// breaking code that compares against these (`event.kind == .stored`); `name` tells them
    /// apart, and the accessors give what a kind carries.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        enum Value: Sendable, Hashable {
            case served(CacheStatus), collapsed, stored, notStored(NotStoredReason), refreshed(bodyChanged: Bool)
            case refreshFailed(reason: String), evicted, invalidated, corrupted(reason: String), storeFailed(reason: String)
            case waitingForSharedFill
        }

        let value: Value

        /// A request was answered, as `CacheStatus` says: from the store (`fresh`, `stale`,
        /// `revalidated`, `fallback`) or from the network (`miss`, `expired`, `bypass`).
        public static func served(_ status: CacheStatus) -> Self { Self(value: .served(status)) }
        /// The request waited for another request for the same key instead of asking the
        /// origin itself, and got its answer (reported beside `served`).
        public static let collapsed = Self(value: .collapsed)
        /// Another process sharing the store is fetching the key: the request waits for its
        /// answer (`CacheConfiguration.sharedFillLease`) instead of asking the origin too.
        public static let waitingForSharedFill = Self(value: .waitingForSharedFill)
        /// A response was written to the store.
        public static let stored = Self(value: .stored)
        /// A response was not stored, and why: the answer to "why is this never cached?".
        public static func notStored(_ reason: NotStoredReason) -> Self { Self(value: .notStored(reason)) }
        /// A background refresh replaced the entry; `bodyChanged` says whether the body differs.
        public static func refreshed(bodyChanged: Bool) -> Self { Self(value: .refreshed(bodyChanged: bodyChanged)) }
        /// A background refresh failed; the stale entry was kept.
        public static func refreshFailed(reason: String) -> Self { Self(value: .refreshFailed(reason: reason)) }
        /// The store evicted the entry to stay within its limits.
        public static let evicted = Self(value: .evicted)
        /// An unsafe method's answer invalidated a URL: whatever was stored for it is removed
        /// (reported whether or not anything was).
        public static let invalidated = Self(value: .invalidated)
        /// A damaged, truncated or foreign entry was found, removed, and treated as a miss.
        public static func corrupted(reason: String) -> Self { Self(value: .corrupted(reason: reason)) }
        /// The store failed to read or write; the request went on without it.
        public static func storeFailed(reason: String) -> Self { Self(value: .storeFailed(reason: reason)) }

        /// The kind's name, the same for every value of it: `served`, `collapsed`, `stored`,
        /// `notStored`, `refreshed`, `refreshFailed`, `evicted`, `invalidated`, `corrupted`,
        /// `storeFailed` or `waitingForSharedFill`; later versions may add more.
        public var name: String {
            switch value {
            case .served: "served"
            case .collapsed: "collapsed"
            case .stored: "stored"
            case .notStored: "notStored"
            case .refreshed: "refreshed"
            case .refreshFailed: "refreshFailed"
            case .evicted: "evicted"
            case .invalidated: "invalidated"
            case .corrupted: "corrupted"
            case .storeFailed: "storeFailed"
            case .waitingForSharedFill: "waitingForSharedFill"
            }
        }

        /// How the request was answered, for `served`; nil for other kinds.
        public var status: CacheStatus? {
            if case .served(let status) = value { return status }
            return nil
        }

        /// Why the response was not stored, for `notStored`; nil for other kinds.
        public var notStoredReason: NotStoredReason? {
            if case .notStored(let reason) = value { return reason }
            return nil
        }

        /// Whether the body changed, for `refreshed`; nil for other kinds.
        public var bodyChanged: Bool? {
            if case .refreshed(let changed) = value { return changed }
            return nil
        }

        /// What went wrong, for `refreshFailed`, `corrupted` and `storeFailed`; nil for other kinds.
        public var reason: String? {
            switch value {
            case .refreshFailed(let reason), .corrupted(let reason), .storeFailed(let reason): reason
            default: nil
            }
        }

        /// The name, and what the kind carries.
        public var description: String {
            switch value {
            case .served(let status): "served(\(status))"
            case .notStored(let reason): "notStored(\(reason.name))"
            case .refreshed(let changed): "refreshed(bodyChanged: \(changed))"
            case .refreshFailed(let reason), .corrupted(let reason), .storeFailed(let reason): "\(name)(\(reason))"
            default: name
            }
        }
    }

    /// What happened.
    public let kind: Kind
    /// The key concerned.
    public let key: CacheKey
    /// The URL concerned, if known.
    public let url: URL?
    /// When it happened, by the cache's clock.
    public let date: Date

    init(kind: Kind, key: CacheKey, url: URL?, date: Date) {
        self.kind = kind
        self.key = key
        self.url = url
        self.date = date
    }

    /// The kind and the key.
    public var description: String { "\(kind) \(key)" }
}

/// A registration made by `HTTPCache.observe(_:)`; `cancel()` ends it.
public final class CacheObservation: Sendable {
    private let cancelAction: @Sendable () -> Void

    init(cancel: @escaping @Sendable () -> Void) { cancelAction = cancel }

    /// Stops delivering events to the handler. Safe to call twice.
    public func cancel() { cancelAction() }
}

/// Delivers events to every observer, synchronously on the thread that emits them.
final class EventHub: Sendable {
    private struct Observers {
        var next: UInt64 = 0
        var handlers: [UInt64: @Sendable (CacheEvent) -> Void] = [:]
    }

    private let observers = Mutex(Observers())
    /// A lock-free "anyone listening?" so an unobserved cache pays nothing per request.
    private let count = Atomic<Int>(0)

    var hasObservers: Bool { count.load(ordering: .relaxed) > 0 }

    func add(_ handler: @escaping @Sendable (CacheEvent) -> Void) -> CacheObservation {
        let id = observers.withLock { state in
            state.next += 1
            state.handlers[state.next] = handler
            count.store(state.handlers.count, ordering: .relaxed)
            return state.next
        }
        return CacheObservation { [weak self] in self?.remove(id) }
    }

    private func remove(_ id: UInt64) {
        observers.withLock { state in
            state.handlers[id] = nil
            count.store(state.handlers.count, ordering: .relaxed)
        }
    }

    func emit(_ event: @autoclosure () -> CacheEvent) {
        guard hasObservers else { return }
        // In the order the observers were added.
        let handlers = observers.withLock { $0.handlers.sorted { $0.key < $1.key }.map(\.value) }
        let event = event()
        for handler in handlers { handler(event) }
    }
}
