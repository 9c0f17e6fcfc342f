import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPCaching

/// A `redis-server` of the bench's own: 127.0.0.1, an ephemeral port (or the one given), no
/// persistence, a cluster node if asked, killed at the end (it holds nothing worth keeping).
final class RedisProcess {
    let port: Int
    private let process = Process()

    init(executable: String, directory: URL, port: Int? = nil, cluster: Bool = false) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.port = port ?? freePort()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--port", "\(self.port)", "--bind", "127.0.0.1", "--dir", directory.path, "--save", "", "--appendonly", "no",
                             "--logfile", directory.appendingPathComponent("redis.log").path]
            + (cluster ? ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"] : [])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let store = try RedisResponseStore(configuration: RedisConfiguration(host: "127.0.0.1", port: self.port, retryDelay: 0))
        let deadline = now() + 10
        while (try? store.ping()) == nil {
            guard now() < deadline, process.isRunning else {
                stop()
                throw CocoaError(.executableLoad)
            }
            usleep(10_000) // polling a server that is starting
        }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A port nothing listens on now: bound to port 0, read back, closed.
private func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}
