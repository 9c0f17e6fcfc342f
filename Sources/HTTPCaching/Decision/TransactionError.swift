import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why a transaction failed its caller.
enum TransactionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The network failed with this error.
    case network(NetworkError)
    /// The origin answered 304 or 206 to a request that did not ask for one.
    case badResponse(status: Int)
    /// The cache itself refused.
    case caching(HTTPCachingError)

    /// An error from the network, as the transaction keeps it.
    init(_ error: any Error) {
        self = .network(NetworkError(error))
    }

    var isCancellation: Bool {
        if case .network(let error) = self { return error.value.domain == NSURLErrorDomain && error.value.code == NSURLErrorCancelled }
        return false
    }

    var description: String {
        switch self {
        case .network(let error): error.value.localizedDescription
        case .badResponse(let status): "the origin answered \(status) to a request that did not ask for one"
        case .caching(let error): error.errorDescription ?? "\(error)"
        }
    }

    /// The error a caller receives.
    var error: any Error {
        switch self {
        case .network(let error):
            return error.error
        case .badResponse:
            return URLError(.badServerResponse, userInfo: [NSLocalizedDescriptionKey: description])
        case .caching(let error):
            return error
        }
    }
}

/// A network error as it came, compared by domain and code.
struct NetworkError: @unchecked Sendable, Equatable {
    /// The error itself, handed to the caller unchanged.
    let error: any Error
    var value: NSError { error as NSError }

    init(_ error: any Error) { self.error = error }

    static func == (lhs: NetworkError, rhs: NetworkError) -> Bool {
        lhs.value.domain == rhs.value.domain && lhs.value.code == rhs.value.code
    }
}
