import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
@testable import HTTPCaching

/// The processes of a group of test servers (a cluster's nodes, a Sentinel group's nodes and
/// sentinels), by port, each with a folder of its own in one temporary directory: started and
/// waited for, killed one at a time as a crash would, and all stopped together.
final class RedisProcessGroup: @unchecked Sendable {
    /// The password of the nodes' default user (the admin), which replicas also use.
    static let adminPassword = "admin-pw"
    /// The ACL user the stores connect as, and its password.
    static let user = "cache"
    static let userPassword = "cache-pw"

    let directory: URL
    private let processes = Mutex<[Int: ChildProcess]>([:])

    /// A group in a new temporary directory whose name starts with `name`.
    init(name: String) {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
    }

    /// The folder of the process on `port`, made if needed.
    /// - Throws: what creating it throws.
    func folder(_ port: Int) throws -> URL {
        let folder = directory.appendingPathComponent("\(port)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// `redis-server`'s arguments for a node on `port` of these tests: 127.0.0.1, its folder,
    /// no persistence, the admin's password (also for its link to a primary) and the ACL user
    /// the stores use, limited to keys, no dangerous commands, and the one channel a near
    /// cache's invalidations arrive on (README, "Servers and ACL").
    /// - Throws: what making its folder throws.
    func serverArguments(_ port: Int) throws -> [String] {
        let (adminPassword, user, userPassword) = (Self.adminPassword, Self.user, Self.userPassword)
        let folder = try folder(port)
        return ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", folder.path, "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--logfile", folder.appendingPathComponent("redis.log").path,
                "--requirepass", adminPassword, "--masterauth", adminPassword,
                "--user", user, "on", ">\(userPassword)", "~*", "+@all", "-@dangerous", "&__redis__:invalidate"]
    }

    /// Starts `executable` as the process on `port` and waits until `answers` says it is up.
    /// - Throws: `RedisServer.Failure` naming `what`, with the end of its log, when it is not
    ///   within 20 s (a sanitizer run on a loaded machine once took over 10).
    func start(_ port: Int, _ executable: String, _ arguments: [String], what: String, answers: () -> Bool) throws {
        let process = try ChildProcess(executable, arguments)
        processes.withLock { $0[port] = process }
        guard eventually(timeout: 20, answers) else {
            let logs = (try? FileManager.default.contentsOfDirectory(at: try folder(port), includingPropertiesForKeys: nil)) ?? []
            let log = logs.filter { $0.pathExtension == "log" }.compactMap { try? String(contentsOf: $0, encoding: .utf8) }.joined()
            throw RedisServer.Failure(description: "\(what) \(port) did not answer PING within 20 s; its log ends:\n\(log.suffix(800))")
        }
    }

    /// The ports whose processes run now.
    var running: [Int] { processes.withLock { $0.keys.sorted() } }

    /// Kills the process on `port` with SIGKILL, as a crash would.
    func kill(_ port: Int) {
        processes.withLock { $0.removeValue(forKey: port) }?.end(with: SIGKILL)
    }

    /// Stops every process (SIGKILL: they hold nothing worth keeping) and removes the directory.
    func stop() {
        let all = processes.withLock { processes in
            defer { processes = [:] }
            return Array(processes.values)
        }
        for process in all { process.end(with: SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// The value of `field` in `INFO`-style text (`field:value` lines), if there is one.
func infoField(_ field: String, in reply: RESPValue) -> String? {
    let text = String(decoding: reply.bytes ?? [], as: UTF8.self)
    return text.split(whereSeparator: \.isNewline).first { $0.hasPrefix(field + ":") }.map { String($0.dropFirst(field.count + 1)) }
}
