import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Every error this package reports, to a task, from a store or for a configuration: what
/// kind it is (`code`, which later versions may add to) and what went wrong, in a sentence
/// (`description`).
///
/// Tell errors apart by `code`: `catch let error as HTTPCachingError where error.code == .notCached`.
/// A store of your own throws `HTTPCachingError.corruptEntry(key:reason:)` for a damaged entry
/// and `.unavailable(reason:)` when it cannot answer.
public struct HTTPCachingError: Error, Hashable, Sendable, CustomStringConvertible, LocalizedError {
    /// What kind of error it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name.
        public let name: String

        /// A download task reached the cache and Foundation's own HTTP class, which runs
        /// download tasks, could not be found.
        public static let downloadTaskUnsupported = Code(name: "downloadTaskUnsupported")
        /// The cache-only policy (`.returnCacheDataDontLoad` included) forbade the network
        /// and nothing stored may answer. A request's own `only-if-cached` gets HTTP's 504
        /// under any other policy.
        public static let notCached = Code(name: "notCached")
        /// The request names a policy the cache does not know.
        public static let unknownPolicy = Code(name: "unknownPolicy")
        /// An upload task's body could not be read, so the request was not sent at all.
        public static let uploadBodyUnavailable = Code(name: "uploadBodyUnavailable")
        /// A redirect or a retry with credentials needed the store's partition secret, which
        /// the store could not give.
        public static let storeUnavailableForCredentials = Code(name: "storeUnavailableForCredentials")
        /// The session's installation was released, or its configuration no longer carries it.
        public static let installationReleased = Code(name: "installationReleased")
        /// Windows that do not satisfy `0 <= fresh <= usable`.
        public static let invalidWindows = Code(name: "invalidWindows")
        /// A negative size limit.
        public static let invalidLimit = Code(name: "invalidLimit")
        /// A Redis URL that is not one the store reads.
        public static let invalidURL = Code(name: "invalidURL")
        /// A configuration value out of range.
        public static let invalidValue = Code(name: "invalidValue")
        /// A stored entry is damaged, truncated or foreign; it was removed, and it is a miss.
        public static let corruptEntry = Code(name: "corruptEntry")
        /// The store cannot be reached or did not answer in time; the request goes on without it.
        public static let unavailable = Code(name: "unavailable")
        /// The cache directory belongs to another user.
        public static let notOwned = Code(name: "notOwned")
        /// A file operation failed.
        public static let io = Code(name: "io")

        /// The code's name.
        public var description: String { name }
    }

    /// What kind of error it is.
    public let code: Code
    /// What went wrong, in a sentence.
    public let description: String
    /// What the code is about, without the sentence around it: a policy's name, a corrupt
    /// entry's or an unavailable store's reason, a file operation. Nil when there is nothing more.
    public let detail: String?
    /// The key of the entry concerned, for `corruptEntry`.
    public let key: CacheKey?
    /// The system's error number, for `io`.
    public let errno: Int32?

    init(_ code: Code, _ description: String, detail: String? = nil, key: CacheKey? = nil, errno: Int32? = nil) {
        self.code = code
        self.description = description
        self.detail = detail
        self.key = key
        self.errno = errno
    }

    /// The sentence, for `localizedDescription`.
    public var errorDescription: String? { description }

    // MARK: - Errors a store of your own throws

    /// A damaged, truncated or foreign entry under `key`, which the store removed.
    public static func corruptEntry(key: CacheKey, reason: String) -> Self {
        Self(.corruptEntry, "corrupt entry for \(key) removed: \(reason)", detail: reason, key: key)
    }

    /// The store cannot be reached or did not answer in time.
    public static func unavailable(reason: String) -> Self {
        Self(.unavailable, "the store is unavailable: \(reason)", detail: reason)
    }

    // MARK: - The package's own

    static let downloadTaskUnsupported = Self(.downloadTaskUnsupported,
                                              "Foundation's own HTTP class, which runs download tasks, could not be found")
    static let notCached = Self(.notCached, "no stored response may answer this request, and it forbids the network (cache-only)")
    static let uploadBodyUnavailable = Self(.uploadBodyUnavailable, "the upload task's body could not be read, so the request was not sent")
    static let storeUnavailableForCredentials = Self(.storeUnavailableForCredentials,
                                                     "the store could not give the secret that partitions credentialed entries")
    static let installationReleased = Self(.installationReleased, "the caching installation of this session's configuration was released")

    static func unknownPolicy(_ name: String) -> Self {
        Self(.unknownPolicy, "the request names the caching policy \(name), which this cache does not know", detail: name)
    }

    static func invalidWindows(fresh: TimeInterval, usable: TimeInterval) -> Self {
        Self(.invalidWindows, "invalid cache windows fresh=\(fresh) usable=\(usable): they must satisfy 0 <= fresh <= usable")
    }

    static func invalidLimit(_ what: String) -> Self { Self(.invalidLimit, "invalid limit: \(what)", detail: what) }

    static func invalidURL(_ reason: String) -> Self { Self(.invalidURL, "invalid Redis URL \(reason)", detail: reason) }

    static func invalidValue(_ reason: String) -> Self {
        Self(.invalidValue, "invalid Redis configuration: \(reason)", detail: reason)
    }

    static func notOwned(path: String, owner: UInt32) -> Self {
        Self(.notOwned, "the cache directory \(path) belongs to user \(owner), not to this process's user \(geteuid())", detail: path)
    }

    static func io(operation: String, path: String, errno code: Int32) -> Self {
        Self(.io, "\(operation) \(path) failed: \(String(cString: strerror(code)))", detail: "\(operation) \(path)", errno: code)
    }
}
