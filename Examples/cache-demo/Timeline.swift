import Foundation
import Synchronization
import HTTPCaching

/// What happened during a walkthrough, in seconds from its start: the requests and how they
/// were served, what reached the origin, the stores and the background refreshes. The SVG
/// timeline is drawn from it (`TimelineSVG`); tests build one by hand.
struct Timeline: Equatable {
    /// A URL's row: its path and the windows its entries were stored with.
    struct Lane: Equatable {
        var path: String
        var fresh: TimeInterval
        var usable: TimeInterval
    }

    /// A request the walkthrough made, and how the cache served it.
    struct Request: Equatable {
        /// Its number in the walkthrough, from 1.
        var n: Int
        var lane: Int
        /// When it was sent, in seconds from the start.
        var start: TimeInterval
        /// How long until its body arrived, in milliseconds.
        var ms: Double
        /// How it was served: `CacheStatus.rawValue` (`miss`, `fresh`, ...).
        var status: String
    }

    /// Something that happened to a lane's URL at a moment.
    struct Mark: Equatable {
        enum Kind: String, Equatable {
            /// The origin received a request (the caller's, a revalidation or a refresh).
            case originRequest
            /// A response was stored: the entry's fresh and usable windows start again.
            case stored
            /// A background refresh finished and replaced the entry.
            case refreshed
        }

        var kind: Kind
        var lane: Int
        var time: TimeInterval
    }

    /// A moment that concerns every lane, such as the origin being stopped.
    struct Note: Equatable {
        var time: TimeInterval
        var text: String
    }

    var title: String
    /// A line under the title (the store, the windows).
    var subtitle = ""
    var lanes: [Lane]
    var requests: [Request] = []
    var marks: [Mark] = []
    var notes: [Note] = []

    /// The last moment anything happened (a request's end included), 0 for an empty timeline.
    var end: TimeInterval {
        let ends = requests.map { $0.start + $0.ms / 1000 } + marks.map(\.time) + notes.map(\.time)
        return ends.max() ?? 0
    }

    /// The lane whose path a URL has (`http://host/path`, query ignored), if any.
    func lane(of url: String) -> Int? {
        let path = URLComponents(string: url)?.path ?? url
        return lanes.firstIndex { $0.path == path }
    }

    /// The periods a lane's entry was fresh, and then usable, after each store: from each
    /// `stored` mark until its windows end or the next store begins, clipped to start at 0.
    func windows(of lane: Int) -> [(fresh: ClosedRange<Double>, usable: ClosedRange<Double>)] {
        let stores = marks.filter { $0.lane == lane && $0.kind == .stored }.map(\.time).sorted()
        let windows = lanes[lane]
        return stores.enumerated().compactMap { index, stored in
            let next = index + 1 < stores.count ? stores[index + 1] : .infinity
            let freshEnd = min(stored + windows.fresh, next), usableEnd = min(stored + windows.usable, next)
            guard usableEnd > 0 else { return nil }
            let start = max(stored, 0)
            return (start...max(start, freshEnd), max(start, freshEnd)...max(start, usableEnd))
        }
    }
}

/// Builds a `Timeline` as a walkthrough runs, from any thread: the walkthrough's requests,
/// the origin's handlers and the cache's events.
final class TimelineRecorder: Sendable {
    private let started = Date()
    private let timeline: Mutex<Timeline>

    init(title: String, lanes: [Timeline.Lane]) {
        timeline = Mutex(Timeline(title: title, lanes: lanes))
    }

    /// Seconds since the recorder was made.
    func now() -> TimeInterval { Date().timeIntervalSince(started) }

    /// What has been recorded so far.
    var snapshot: Timeline { timeline.withLock { $0 } }

    /// Sets the line under the title.
    func setSubtitle(_ text: String) { timeline.withLock { $0.subtitle = text } }

    /// A request sent at `start` (seconds from the start) to `url`, served as `status`.
    func request(_ n: Int, url: String, start: TimeInterval, ms: Double, status: String) {
        timeline.withLock { timeline in
            guard let lane = timeline.lane(of: url) else { return }
            timeline.requests.append(.init(n: n, lane: lane, start: start, ms: ms, status: status))
        }
    }

    /// Something that happened to `url`, now or at `date`.
    func mark(_ kind: Timeline.Mark.Kind, url: String, at date: Date? = nil) {
        let time = date.map { $0.timeIntervalSince(started) } ?? now()
        timeline.withLock { timeline in
            guard let lane = timeline.lane(of: url) else { return }
            timeline.marks.append(.init(kind: kind, lane: lane, time: time))
        }
    }

    /// A moment that concerns every lane.
    func note(_ text: String) {
        let time = now()
        timeline.withLock { $0.notes.append(.init(time: time, text: text)) }
    }

    /// Records the cache's stores and finished refreshes, and the entries a store already
    /// held (stored before the start, so their windows may reach into the run).
    /// - Returns: the observation; cancel it when the run ends.
    func follow(_ cache: HTTPCache) -> CacheObservation {
        for info in (try? cache.entryInfos()) ?? [] where info.key.variant == nil {
            mark(.stored, url: info.url, at: info.storedAt)
        }
        return cache.observe { [self] event in
            if event.kind == .stored, event.key.variant == nil { mark(.stored, url: event.key.url, at: event.date) }
            if event.kind.bodyChanged != nil { mark(.refreshed, url: event.key.url, at: event.date) }
        }
    }
}
