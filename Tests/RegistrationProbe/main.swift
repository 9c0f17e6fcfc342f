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
