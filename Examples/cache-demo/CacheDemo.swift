import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The demo's entry point: `swift run cache-demo [fetch|explain|stats ...]`.
@main
enum CacheDemo {
    static func main() async {
        let command: DemoCommand
        do {
            command = try DemoCommand.parse(Array(CommandLine.arguments.dropFirst()))
        } catch {
            Output.error(error.description)
            Output.error("try 'cache-demo --help'")
            exit(2)
        }
        switch command {
        case .help:
            Output.line(DemoCommand.usage)
        case .walkthrough(let store, let svgPath):
            exit(await Walkthrough.run(store: store, svgPath: svgPath))
        case .fetch(let options):
            exit(await FetchCommand.run(options))
        case .explain(let options):
            exit(await ExplainCommand.run(options))
        case .stats(let options):
            exit(StatsCommand.run(options))
        }
    }
}
