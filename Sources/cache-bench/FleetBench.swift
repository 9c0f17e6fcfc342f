import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

/// Misses for one cold key from several processes sharing a disk store, each with concurrent
/// callers: how many requests reach the origin (one, when the fill is claimed across them).
enum FleetBench {
    /// Four processes (copies of this one, `--fill-worker`) of 16 callers each, started together
    /// on one cold key the origin answers after 100 ms. - Returns: the origin's request count.
    static func collapsedMisses(origin: LoopbackOrigin, processes: Int = 4, callers: Int = 16) throws -> Int {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cache-bench-fleet-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        origin.route("/fleet-cold", response: .init(headers: [("Cache-Control", "max-age=600")], text: "filled", delay: 0.1))
        let url = origin.url("/fleet-cold")
        let children = try (0..<processes).map { _ in
            try BenchChild(arguments: ["--fill-worker", directory.path, url.absoluteString, String(callers)])
        }
        for child in children { _ = child.line() } // "ready": its store is open
        for child in children { child.send("go") }
        for child in children { _ = child.line(); child.process.waitUntilExit() } // "done"
        return origin.requestCount("/fleet-cold")
    }

    /// The worker: opens the store, says "ready", waits for a line, sends `callers` concurrent
    /// requests, says "done" when every one has its answer.
    static func worker(directory: String, url: URL, callers: Int) throws {
        let store = try DiskResponseStore(directory: URL(fileURLWithPath: directory))
        let configuration = URLSessionConfiguration.ephemeral
        configuration.enableHTTPCaching(HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 600, usable: 600)),
                                                  store: store))
        let session = URLSession(configuration: configuration)
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        _ = Swift.readLine()
        let group = DispatchGroup()
        for _ in 0..<callers {
            group.enter()
            session.dataTask(with: url) { _, _, _ in group.leave() }.resume()
        }
        group.wait()
        FileHandle.standardOutput.write(Data("done\n".utf8))
        store.close()
    }
}
