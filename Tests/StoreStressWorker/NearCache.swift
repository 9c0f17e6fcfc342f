import Foundation
import HTTPCaching

/// `store-stress-worker near STORE RETRYDELAY`: a tiered store (memory in front of STORE, a
/// directory or a `redis://` URL whose retry delay is RETRYDELAY seconds), driven line by line:
///
///     get PATH    prints "near BODY" (memory answered), "back BODY" (the back store did) or "none"
///     serving     waits until memory serves, prints "serving" (or "not-serving" after 10 s)
///     lost        waits until memory stops serving, prints "lost" (or "serving" after 10 s)
///
/// One process of a fleet whose near cache another process invalidates.
enum NearCache {
    static func run(store location: String, retryDelay: TimeInterval) throws {
        let back: any ResponseStore
        if location.hasPrefix("redis://") {
            var configuration = try RedisConfiguration(url: location)
            configuration.retryDelay = retryDelay
            back = try RedisResponseStore(configuration: configuration)
        } else {
            back = try DiskResponseStore(directory: URL(fileURLWithPath: location))
        }
        let tiered = TieredResponseStore(back: back)
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "get" where words.count == 2:
                let key = StressBody.key(words[1])
                // Memory alone (a disk back store may also answer at once, from the page cache).
                if tiered.servesFromMemory, let entry = tiered.memory.entry(for: key) {
                    say("near " + String(decoding: entry.body, as: UTF8.self))
                } else if let entry = try? tiered.entry(for: key) {
                    say("back " + String(decoding: entry.body, as: UTF8.self))
                } else {
                    say("none")
                }
            case "serving":
                say(wait(10) { tiered.servesFromMemory } ? "serving" : "not-serving")
            case "lost":
                say(wait(10) { !tiered.servesFromMemory } ? "lost" : "serving")
            default:
                say("unknown \(line)")
            }
        }
        (back as? DiskResponseStore)?.close()
    }

    /// Waits up to `seconds` for a condition, checking it every millisecond.
    private static func wait(_ seconds: TimeInterval, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { return false }
            usleep(1000)
        }
        return true
    }
}
