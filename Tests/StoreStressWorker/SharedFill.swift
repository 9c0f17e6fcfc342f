import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import Synchronization

/// `store-stress-worker fill STORE URL CALLERS`: CALLERS concurrent GETs of URL through a cache
/// over STORE (a directory, or a `redis://` URL), as one process of a fleet. Prints "waiting"
/// when its request for the key waits for another process's fill, then one "answer STATUS BODY"
/// line per request and "done".
enum SharedFill {
    static func run(store location: String, url: URL, callers: Int) throws {
        let store: any ResponseStore = location.hasPrefix("redis://")
            ? try RedisResponseStore(configuration: RedisConfiguration(url: location))
            : try DiskResponseStore(directory: URL(fileURLWithPath: location))
        let cache = HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 600, usable: 600)), store: store)
        let observation = cache.observe { event in
            if event.kind == .waitingForSharedFill { say("waiting") }
        }
        defer { observation.cancel() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(cache)
        let session = URLSession(configuration: configuration)
        let answers = Mutex<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<callers {
            group.enter()
            session.dataTask(with: url) { data, response, error in
                let status = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: HTTPCachingHeaders.statusField) ?? "none"
                let line = error.map { "answer error \($0.localizedDescription)" }
                    ?? "answer \(status) \(String(decoding: data ?? Data(), as: UTF8.self))"
                answers.withLock { $0.append(line) }
                group.leave()
            }.resume()
        }
        group.wait()
        answers.withLock { $0 }.forEach(say)
        say("done")
        session.finishTasksAndInvalidate()
    }
}
