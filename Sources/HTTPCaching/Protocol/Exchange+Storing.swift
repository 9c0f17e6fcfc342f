import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Exchange {
    /// Asks the caller's delegate, on its session's delegate queue (never Foundation's shared
    /// queue, where one slow delegate would hold every session), whether and what to store
    /// (`urlSession(_:dataTask:willCacheResponse:completionHandler:)`), with the response the
    /// cache is about to store; its answer goes back to the transaction.
    func askToStore(_ entry: CacheEntry) {
        guard let facts = caller?.facts, let session = facts.session, let delegate = facts.cacheDelegate,
              let task = facts.task as? URLSessionDataTask else {
            return answered(.store(replacement: nil, inMemoryOnly: false))
        }
        let response = HTTPURLResponse(url: entry.url, statusCode: entry.statusCode, httpVersion: "HTTP/1.1",
                                       headerFields: entry.headers) ?? HTTPURLResponse(ResponseHead(statusCode: entry.statusCode, headers: [:], url: entry.url))
        // A body written to the store as it arrived is proposed as the store holds it (a disk
        // store maps its file: nothing is read unless the delegate reads it).
        let writer = state.withLock { $0.writer }
        let body = writer.map { (try? $0.value.body) ?? Data() } ?? entry.body
        let proposed = CachedURLResponse(response: response, data: body, userInfo: nil, storagePolicy: .allowed)
        let box = UncheckedBox((session, delegate, task, proposed))
        // After the response and its body reached the delegate's queue, as Foundation asks.
        caller?.delivery.afterDelivered {
            session.delegateQueue.addOperation {
                let (session, delegate, task, proposed) = box.value
                delegate.urlSession(session, dataTask: task, willCacheResponse: proposed) { answer in
                    self.answered(Self.storeAnswer(answer, proposed: proposed))
                }
            }
        }
    }

    private func answered(_ answer: DelegateStoreAnswer) {
        let now = cache.now()
        run(state.withLock { $0.transaction?.delegateAnswered(answer, now: now) ?? [] })
    }

    /// What a delegate's `willCacheResponse` answer means for the store.
    static func storeAnswer(_ answer: CachedURLResponse?, proposed: CachedURLResponse) -> DelegateStoreAnswer {
        guard let answer, answer.storagePolicy != .notAllowed else { return .declined }
        let inMemoryOnly = answer.storagePolicy == .allowedInMemoryOnly
        if answer === proposed { return .store(replacement: nil, inMemoryOnly: inMemoryOnly) }
        guard let http = answer.response as? HTTPURLResponse else { return .declined }
        // The proposed body handed back (Alamofire's `modify` copies the response, keeping the
        // data): the same bytes, which are not read to compare them.
        let sameBody = answer.data.count == proposed.data.count
            && answer.data.withUnsafeBytes { new in proposed.data.withUnsafeBytes { new.baseAddress == $0.baseAddress } }
        return .store(replacement: .init(head: ResponseHead(http), body: sameBody ? nil : answer.data), inMemoryOnly: inMemoryOnly)
    }
}
