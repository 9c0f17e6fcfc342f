import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit

/// A `redis-server` of a test's own: 127.0.0.1, an ephemeral port, a temporary directory, no
/// persistence. Stopped (and its directory removed) by `stop()` or, for a test that failed
/// before it got there, by `deinit`.
final class RedisServer: @unchecked Sendable {
    /// Whether the Redis tests must run: `HTTP_CACHING_REQUIRE_REDIS=1` (set by `.ci/run`).
    static let isRequired = ProcessInfo.processInfo.environment["HTTP_CACHING_REQUIRE_REDIS"] == "1"

    /// `redis-server` on the PATH, if there is one.
    static let executable = executableOnPath("redis-server")

    /// What the skipped tests say.
    static let skipMessage = "redis-server not found on PATH, so the Redis tests are skipped: install it "
        + "(apt-get install redis-server) or run .ci/run, which installs it; HTTP_CACHING_REQUIRE_REDIS=1 makes a missing server a failure"

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let port: Int
    let directory: URL
    let arguments: [String]
    /// How `configuration()` reaches it over TLS; nil when it speaks plain TCP. A TLS server
    /// listens on `--tls-port` only (`--port 0`); its certificate files are in `arguments`.
    let tls: RedisTLSOptions?
    private var process: ChildProcess?

    /// Starts a server with extra configuration (for example `["--maxmemory", "2mb"]`), on a
    /// free port (another, if the port is taken before the server binds it); with `tls`, a
    /// TLS port only, which `configuration()` reaches with those options.
    /// - Throws: `Failure` when `redis-server` is missing or does not answer PING in time.
    init(_ arguments: [String] = [], tls: RedisTLSOptions? = nil) throws {
        guard let executable = Self.executable else {
            throw Failure(description: Self.isRequired
                ? "HTTP_CACHING_REQUIRE_REDIS=1 requires redis-server on PATH, and there is none: install it (apt-get install redis-server) or run .ci/run"
                : Self.skipMessage)
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.arguments = arguments
        self.tls = tls
        var lastError: Error?
        for _ in 0..<5 {
            let candidate = Self.freePort()
            do {
                process = try Self.launch(executable, port: candidate, directory: directory, arguments: arguments, tls: tls)
                port = candidate
                return
            } catch {
                lastError = error // most likely the port was taken first: try another
            }
        }
        try? FileManager.default.removeItem(at: directory)
        throw lastError ?? Failure(description: "redis-server did not start")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A store configuration for this server with a key prefix of its own and short timeouts.
    func configuration(prefix: String = "test-\(UUID().uuidString):") -> RedisConfiguration {
        RedisConfiguration(host: "127.0.0.1", port: port, keyPrefix: prefix,
                           connectTimeout: 0.5, commandTimeout: 0.5, retryDelay: 0.05, tls: tls)
    }

    /// The store conformance suite on this server's stores, each on a prefix of its own,
    /// damaging an entry by writing a foreign value into its hash, with exclusive claims.
    /// - Throws: what a check throws.
    func conformanceReport() throws -> StoreConformance.Report {
        try StoreConformance(makeStore: { try self.makeStore() },
                             corrupt: { store, key in
                                 let redis = try #require(store as? RedisResponseStore)
                                 _ = try self.command("HSET", redis.layout.entryKey(key), "d", "not an entry")
                             },
                             claimsAreExclusive: true).run()
    }

    /// A new store on this server, on a prefix of its own.
    func makeStore(prefix: String = "test-\(UUID().uuidString):") throws -> RedisResponseStore {
        try RedisResponseStore(configuration: configuration(prefix: prefix))
    }

    /// Runs one command on a connection of its own (with the given credentials).
    func command(_ name: String, _ arguments: any RedisArgument..., username: String? = nil, password: String? = nil,
                 database: Int = 0) throws -> RESPValue {
        var configuration = self.configuration()
        configuration.username = username
        configuration.password = password
        configuration.database = database
        let connection = try RedisConnection.open(configuration, limits: RESPParser.Limits(), tls: try tls.map(RedisTLSContext.init))
        defer { connection.close() }
        return try connection.execute([RedisCommand(name, arguments: arguments.map(\.redisBytes))], timeout: 5)[0]
    }

    /// Whether the server process is running.
    var isRunning: Bool { process?.hasExited == false }

    /// Stops the server with SIGTERM and waits for it (SIGKILL after 10 s).
    func stop() {
        process?.end(with: SIGTERM)
        process = nil
    }

    /// Kills the server with SIGKILL and waits for it, as a crash would.
    func kill() {
        process?.end(with: SIGKILL)
        process = nil
    }

    /// Stops the process without ending it (SIGSTOP): connections are accepted by the kernel
    /// but nothing is answered, like a server stuck in a long command.
    func pause() {
        process?.send(SIGSTOP)
    }

    /// Lets a paused server go on (SIGCONT).
    func resume() {
        process?.send(SIGCONT)
    }

    /// Starts the server again on the same port after `kill()` or `stop()`.
    /// - Throws: `Failure` when it does not answer PING in time.
    func restart() throws {
        guard process == nil, let executable = Self.executable else { return }
        process = try Self.launch(executable, port: port, directory: directory, arguments: arguments, tls: tls)
    }

    private static func launch(_ executable: URL, port: Int, directory: URL, arguments: [String],
                               tls: RedisTLSOptions?) throws -> ChildProcess {
        let ports = tls != nil ? ["--port", "0", "--tls-port", "\(port)"] : ["--port", "\(port)"]
        let process = try ChildProcess(executable.path,
                                       ports + ["--bind", "127.0.0.1", "--dir", directory.path, "--save", "",
                                        "--appendonly", "no", "--daemonize", "no",
                                        "--logfile", directory.appendingPathComponent("redis.log").path] + arguments)
        // Poll with PING until it answers; wake early if the process ends (a port taken).
        let deadline = Date().addingTimeInterval(10)
        let configuration = RedisConfiguration(host: "127.0.0.1", port: port, connectTimeout: 0.5)
        // Any certificate will do to see that it is up (some tests give it one for another
        // name), with the client certificate a client would show.
        let context = try tls.map { options in
            try RedisTLSContext(RedisTLSOptions(certificateFile: options.certificateFile, keyFile: options.keyFile,
                                                allowsUntrustedCertificates: true))
        }
        while Date() < deadline, !process.waitForExit(timeout: 0.01) {
            if let connection = try? RedisConnection.open(configuration, limits: RESPParser.Limits(), tls: context),
               let reply = try? connection.execute([RedisCommand("PING")], timeout: 1).first {
                // A server with a password answers NOAUTH: it is up all the same.
                if reply == .simpleString("PONG") || reply.errorMessage?.hasPrefix("NOAUTH") == true { return process }
            }
        }
        let log = (try? String(contentsOf: directory.appendingPathComponent("redis.log"), encoding: .utf8)) ?? ""
        process.end(with: SIGKILL)
        throw Failure(description: "redis-server on port \(port) did not answer PING within 10 s; its log ends:\n\(log.suffix(800))")
    }

    /// A port nothing listens on now: bound to port 0, read back, closed.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs a test only where `redis-server` is installed, or where it is required (then a
    /// missing server fails the test with the same message).
    static var redisServer: Self {
        .enabled(if: RedisServer.executable != nil || RedisServer.isRequired, Comment(rawValue: RedisServer.skipMessage))
    }
}

/// Waits for a condition, checking it again every few milliseconds; false after `timeout`.
func eventually(timeout: TimeInterval = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    let tick = DispatchSemaphore(value: 0)
    while Date() < deadline {
        if condition() { return true }
        _ = tick.wait(timeout: .now() + 0.01)
    }
    return condition()
}

/// A program on the `PATH` (`/usr/local/bin:/usr/bin:/bin` without one), if there is one.
func executableOnPath(_ name: String) -> URL? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    return path.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent(name) }
        .first { FileManager.default.isExecutableFile(atPath: $0.path) }
}
