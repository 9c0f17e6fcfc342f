import Foundation

/// The two freshness windows of an entry: fresh (serve, no network) and usable (serve,
/// then refresh in the background).
///
/// An entry younger than `fresh` is served from the store without touching the network;
/// one younger than `usable` is served at once and refreshed in the background; an older
/// one is removed and fetched again. The default is 60 seconds fresh, 2 days usable.
public struct CacheWindows: Sendable, Hashable, CustomStringConvertible {
    /// How long an entry is served with no network, in seconds. The default is 60.
    public let fresh: TimeInterval
    /// How long an entry may be served at all, in seconds. The default is 2 days.
    public let usable: TimeInterval

    /// 60 seconds fresh, 2 days usable.
    public static let standard = CacheWindows(unchecked: 60, 172_800)

    /// Windows of the given lengths.
    /// - Throws: `HTTPCachingError.invalidWindows` unless `0 <= fresh <= usable`
    ///   and both are finite.
    public init(fresh: TimeInterval, usable: TimeInterval) throws(HTTPCachingError) {
        guard fresh.isFinite, usable.isFinite, fresh >= 0, fresh <= usable else {
            throw .invalidWindows(fresh: fresh, usable: usable)
        }
        self.fresh = fresh
        self.usable = usable
    }

    /// Windows of whole seconds, for literals: `CacheWindows(fresh: 60, usable: 3600)`.
    /// - Precondition: `0 <= fresh <= usable`.
    public init(fresh: Int, usable: Int) {
        precondition(fresh >= 0 && fresh <= usable, "invalid cache windows fresh=\(fresh) usable=\(usable): they must satisfy 0 <= fresh <= usable")
        self.init(unchecked: TimeInterval(fresh), TimeInterval(usable))
    }

    init(unchecked fresh: TimeInterval, _ usable: TimeInterval) {
        self.fresh = fresh
        self.usable = usable
    }

    /// `fresh=N, usable=N`.
    public var description: String { "fresh=\(fresh), usable=\(usable)" }

    /// Parses the `fresh=N, usable=N` form used by the per-request header; nil if malformed.
    init?(headerValue: String) {
        var fresh: TimeInterval?, usable: TimeInterval?
        for part in headerValue.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let value = TimeInterval(pair[1]) else { return nil }
            switch pair[0].lowercased() {
            case "fresh": fresh = value
            case "usable": usable = value
            default: return nil
            }
        }
        guard let fresh, let usable, let windows = try? CacheWindows(fresh: fresh, usable: usable) else { return nil }
        self = windows
    }
}

