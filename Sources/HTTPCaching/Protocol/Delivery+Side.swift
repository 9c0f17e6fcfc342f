import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Delivery {
    /// A `data(for:delegate:)` task's data delegate: Foundation's own HTTP class hands it every
    /// chunk besides giving the completion handler the whole body, but the protocol client
    /// hands chunks only to a session delegate's tasks, so every `didLoad` goes to it too.
    struct Side: @unchecked Sendable {
        let session: URLSession
        let delegate: URLSessionDataDelegate
    }
}
