import Foundation

/// Another copy of this bench, started with `arguments` (a worker mode such as `--fill-worker`
/// or `--near-worker`), spoken to a line at a time over its standard input and output.
final class BenchChild {
    let process = Process()
    private let input = Pipe(), output = Pipe()

    init(arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// Sends one line.
    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// The next line it printed; nil at the end of its output.
    func line() -> String? {
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([10]) { break }
            line += byte
        }
        return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
    }

    /// Closes its input and waits for it to exit.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
