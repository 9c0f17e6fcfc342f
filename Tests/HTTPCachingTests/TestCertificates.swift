import Foundation
import Synchronization
import Testing
@testable import HTTPCaching

/// A throwaway CA and certificates it signed, made with the `openssl` command once per test
/// process in a temporary directory (removed when the process exits): a server certificate for
/// `localhost` and `127.0.0.1`, one for another name only, and a client certificate.
struct TestCertificates: Sendable {
    /// `openssl` on the PATH, if there is one.
    static let executable = executableOnPath("openssl")

    /// What the skipped tests say.
    static let skipMessage = "the TLS tests need the openssl command (to make a throwaway CA) and OpenSSL 3's libssl.so.3: "
        + "install openssl and libssl3 (apt-get install openssl libssl3)"

    /// Whether the TLS tests can run here; where Redis is required they must.
    static var canRun: Bool { executable != nil && RedisTLSOptions.isAvailable }

    let directory: URL
    var caFile: String { directory.appendingPathComponent("ca.pem").path }
    /// Issued for `DNS:localhost` and `IP:127.0.0.1`.
    var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    var serverKey: String { directory.appendingPathComponent("server.key").path }
    /// Issued for `DNS:redis.example.invalid` only.
    var otherNameCertificate: String { directory.appendingPathComponent("other.pem").path }
    var otherNameKey: String { directory.appendingPathComponent("other.key").path }
    /// A client certificate, with its key in `clientKey`.
    var clientCertificate: String { directory.appendingPathComponent("client.pem").path }
    var clientKey: String { directory.appendingPathComponent("client.key").path }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The certificates, made on first use.
    static let shared: Result<TestCertificates, Failure> = Result { () throws(Failure) in try TestCertificates() }

    /// - Throws: `Failure` when `openssl` is missing or fails.
    private init() throws(Failure) {
        guard let openssl = Self.executable else { throw Failure(description: Self.skipMessage) }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-tls-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot make \(directory.path): \(error)")
        }
        atexit { TestCertificates.removeAll() }
        Self.made.withLock { $0.append(directory) }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(openssl, ["req", "-x509"] + key + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                                                   "-subj", "/CN=swift-http-caching test CA",
                                                   "-addext", "basicConstraints=critical,CA:TRUE",
                                                   "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try issue(openssl, key, name: "server", subject: "localhost", alternativeNames: "DNS:localhost,IP:127.0.0.1")
        try issue(openssl, key, name: "other", subject: "redis.example.invalid", alternativeNames: "DNS:redis.example.invalid")
        try issue(openssl, key, name: "client", subject: "cache client", alternativeNames: nil)
    }

    /// A key and a certificate signed by the CA.
    private func issue(_ openssl: URL, _ key: [String], name: String, subject: String, alternativeNames: String?) throws(Failure) {
        try run(openssl, ["req"] + key + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(subject)"])
        let extensions = directory.appendingPathComponent("\(name).ext")
        let text = alternativeNames.map { "subjectAltName=\($0)\n" } ?? "extendedKeyUsage=clientAuth\n"
        guard FileManager.default.createFile(atPath: extensions.path, contents: Data(text.utf8)) else {
            throw Failure(description: "cannot write \(extensions.path)")
        }
        try run(openssl, ["x509", "-req", "-in", "\(name).csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                          "-out", "\(name).pem", "-days", "2", "-extfile", extensions.path])
    }

    /// Runs `openssl` in the directory (with `ChildProcess`, as every program the tests run).
    private func run(_ openssl: URL, _ arguments: [String]) throws(Failure) {
        let log = directory.appendingPathComponent("openssl.log")
        let process: ChildProcess
        do {
            process = try ChildProcess("/bin/sh", ["-c", "cd \"$1\" && shift 2 && exec \"$0\" \"$@\" > openssl.log 2>&1",
                                                   openssl.path, directory.path, "--"] + arguments)
        } catch {
            throw Failure(description: "cannot run openssl: \(error)")
        }
        guard process.waitForExit(timeout: 60), process.exitStatus == 0 else {
            let message = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw Failure(description: "openssl \(arguments.joined(separator: " ")) failed: \(message)")
        }
    }

    private static let made = Mutex<[URL]>([])

    private static func removeAll() {
        for directory in made.withLock({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs a test where `openssl`, OpenSSL 3 and `redis-server` are installed, and always
    /// where Redis is required (`HTTP_CACHING_REQUIRE_REDIS=1`, as `.ci/run` sets), so a
    /// missing one fails there; elsewhere skipped with a message naming what is missing.
    static var redisTLS: Self {
        .enabled(if: RedisServer.isRequired || (TestCertificates.canRun && RedisServer.executable != nil),
                 Comment(rawValue: TestCertificates.canRun ? RedisServer.skipMessage : TestCertificates.skipMessage))
    }
}
