import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Stores what a download task fetched through Foundation's own HTTP class, when the cache
/// would have stored the same answer to a data task: a later data task for the URL is a hit.
///
/// The decision is the data task's (`CacheTransaction`, the request as it last went out, after
/// redirects); the body is the file Foundation wrote. Made on the task's work queue from what
/// is already in memory; `store()` reads the file and writes the entry on an I/O queue.
struct DownloadStoring: @unchecked Sendable {
    let url: String
    private let request: URLRequest
    private let response: HTTPURLResponse
    private let file: URL
    private let binding: ProtocolBinding
    /// When the download's request was sent: its age counts from there, as a data task's does.
    private let sentAt: Date?

    /// What to store after a download; nil when there is nothing that could be stored (not a
    /// download task, not a GET, no HTTP response, or no file to read).
    init?(task: URLSessionTask, inner: URLProtocol, binding: ProtocolBinding, sentAt: Date?) {
        guard task is URLSessionDownloadTask, let request = task.currentRequest ?? task.originalRequest,
              request.sentMethod == "GET", let url = request.url,
              let response = task.response as? HTTPURLResponse,
              let file = TaskIntrospection.downloadFile(of: inner) else { return nil }
        self.url = url.absoluteString
        self.request = request
        self.response = response
        self.file = file
        self.binding = binding
        self.sentAt = sentAt
    }

    /// Decides as for a data task's answer, and stores the file's bytes when that says so.
    /// Call it on an I/O queue.
    func store() {
        let cache = binding.engine
        let headers = binding.keys.headers(request)
        guard let key = try? binding.key(for: request) else { return } // no partition secret: not stored
        let context = CacheTransaction.Context(request: request, headers: headers, key: key, configuration: cache.configuration,
                                               role: .foreground(streaming: false), maxEntrySize: cache.store.maxEntrySize,
                                               credentialed: binding.keys.isCredentialed(headers),
                                               entryWindows: cache.windowsSetAhead(for: key))
        var transaction = CacheTransaction(context)
        let now = cache.now()
        var actions = transaction.start(entry: nil, now: now).filter(\.isStoreWork)
        if let sentAt { transaction.sent(at: sentAt) }
        actions += transaction.head(ResponseHead(response), now: now).filter(\.isStoreWork)
        if transaction.storesAnswer {
            guard let body = Self.read(file, limit: cache.store.maxEntrySize) else {
                actions.append(.emit(.notStored(.tooLarge(bytes: Self.size(of: file), limit: cache.store.maxEntrySize))))
                return perform(actions, key: key)
            }
            actions += transaction.body(body)
            actions += transaction.end(now: now)
        }
        perform(actions.filter(\.isStoreWork), key: key)
    }

    private func perform(_ actions: [CacheTransaction.Action], key: CacheKey) {
        let cache = binding.engine
        for action in actions {
            switch action {
            case .emit(let kind): cache.emit(kind, key, request.url)
            case .store(let entry): cache.write(entry)
            case .remove(let removed): cache.remove(removed, url: request.url)
            default: break
            }
        }
    }

    /// The file's bytes, if it holds no more than `limit`.
    private static func read(_ file: URL, limit: Int) -> Data? {
        let size = size(of: file)
        guard size >= 0, size <= limit else { return nil }
        return try? Data(contentsOf: file)
    }

    private static func size(of file: URL) -> Int {
        var info = stat()
        guard stat(file.path, &info) == 0 else { return -1 }
        return Int(info.st_size)
    }
}

extension CacheTransaction.Action {
    /// Whether the action is work on the store or an event about it (what a download, already
    /// delivered by Foundation, still needs).
    var isStoreWork: Bool {
        switch self {
        case .store, .remove: true
        case .emit(let kind): kind.name == "notStored" || kind == .stored
        default: false
        }
    }
}
