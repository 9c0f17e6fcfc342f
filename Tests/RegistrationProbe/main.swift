// Run by the tests in a fresh process: registers caching with URLProtocol.registerClass
// before any session exists, then uses URLSession.shared, and prints one line per request
// plus the origin's request count, so the test can check caching and the absence of loops.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPCaching
import LoopbackOrigin

let origin = try LoopbackOrigin()
origin.routeVersioned("/probe")

// `--trailer-answer [--caching]`: one request to an answer whose chunked body ends with a
// trailer field, on a plain session or a caching one; prints the body if the process lives.
if CommandLine.arguments.contains("--trailer-answer") {
    var answer = LoopbackOrigin.Response()
    answer.raw = Data("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\nX-Trailer: t\r\n\r\n".utf8)
    origin.route("/trailer", response: answer)
    let configuration = URLSessionConfiguration.ephemeral
    if CommandLine.arguments.contains("--caching") { configuration.enableHTTPCaching(HTTPCache()) }
    let done = DispatchSemaphore(value: 0)
    URLSession(configuration: configuration).dataTask(with: origin.url("/trailer")) { data, _, _ in
        print(String(decoding: data ?? Data(), as: UTF8.self))
        done.signal()
    }.resume()
    done.wait()
    exit(0)
}

// `--handler-starts-task [--hop]`: an event handler that starts a task when a hit is served
// from memory, right where the event happens (Foundation's shared URLSession queue), or after
// a hop to another queue; prints "started" once the task it started has its answer.
if CommandLine.arguments.contains("--handler-starts-task") {
    let cache = HTTPCache(configuration: CacheConfiguration(windows: CacheWindows(fresh: 60, usable: 60)))
    let configuration = URLSessionConfiguration.ephemeral
    configuration.enableHTTPCaching(cache)
    let session = URLSession(configuration: configuration)
    let other = URLSession(configuration: .ephemeral)
    let hops = CommandLine.arguments.contains("--hop")
    let answered = DispatchSemaphore(value: 0)
    let observation = cache.observe { event in
        guard event.kind == .served(.fresh) else { return }
        let start: @Sendable () -> Void = { other.dataTask(with: origin.url("/probe?other")) { _, _, _ in answered.signal() }.resume() }
        if hops { DispatchQueue.global().async(execute: start) } else { start() }
    }
    for _ in 0..<2 {
        let done = DispatchSemaphore(value: 0)
        session.dataTask(with: origin.url("/probe?a")) { _, _, _ in done.signal() }.resume()
        done.wait()
    }
    answered.wait()
    observation.cancel()
    print("started")
    exit(0)
}
let alsoInConfiguration = CommandLine.arguments.contains("--both")
let cache = HTTPCache()
_ = URLProtocol.registerClass(CachingURLProtocol.installation(for: cache).protocolClass)
let session: URLSession
if alsoInConfiguration {
    let configuration = URLSessionConfiguration.default
    configuration.enableHTTPCaching(cache)
    session = URLSession(configuration: configuration)
} else {
    session = URLSession.shared
}

let done = DispatchSemaphore(value: 0)
for path in ["/probe?a", "/probe?b", "/probe?a", "/probe?c", "/probe?b"] {
    session.dataTask(with: origin.url(path)) { data, response, error in
        let status = (response as? HTTPURLResponse)?.cacheStatus?.rawValue ?? "none"
        print("\(path) \(status) \(String(decoding: data ?? Data(), as: UTF8.self)) \(error.map { "\($0)" } ?? "ok")")
        done.signal()
    }.resume()
    done.wait()
}
print("origin \(origin.requestCount("/probe"))")
