import Foundation
import Synchronization

/// Redis's client-side caching for a near cache: one connection of its own that asks the
/// server to tell it of every change to keys under a prefix, on a thread of its own.
///
/// RESP2 with one connection: `CLIENT ID`, then `CLIENT TRACKING on REDIRECT <its own id>
/// BCAST PREFIX <prefix>`, then `SUBSCRIBE __redis__:invalidate`. From then on the server
/// sends a message naming the keys each write, removal, expiry or eviction under the prefix
/// touched (a null for `FLUSHALL`/`FLUSHDB`), whoever made it. Tracking lives as long as the
/// connection: when it closes, fails, or stays silent past a `PING` (sent after a second
/// without traffic, answered within `commandTimeout`), `lost` is called, and the listener
/// connects again after `retryDelay`; `up` is called once tracking is on again. No lock is held
/// while the thread talks to the server.
final class RedisInvalidationListener: Sendable {
    /// Called when tracking is on: from now on every change is told.
    typealias Up = @Sendable () -> Void
    /// Called with the Redis keys changed; nil for every key (a flush).
    typealias Invalidated = @Sendable ([[UInt8]]?) -> Void

    private let configuration: RedisConfiguration
    private let prefix: [UInt8]
    private let up: Up
    private let lost: @Sendable () -> Void
    private let invalidated: Invalidated
    /// The TLS context of a `rediss://` store's configuration, made once (nil: plain, or it
    /// could not be made, and every session then fails as the store's own calls do).
    private let tls: RedisTLSContext?
    private let stopped = Atomic<Bool>(false)
    /// How long the connection may stay silent before a `PING` checks it.
    static let heartbeat: TimeInterval = 1

    /// - Parameter shared: the TLS context for a `rediss://` configuration, made once for a fleet
    ///   of listeners (`.some(nil)`: it could not be made); when not given, made from the options.
    init(configuration: RedisConfiguration, prefix: [UInt8], tls shared: RedisTLSContext?? = nil, up: @escaping Up,
         lost: @escaping @Sendable () -> Void, invalidated: @escaping Invalidated) {
        self.configuration = configuration
        self.prefix = prefix
        self.up = up
        self.lost = lost
        self.invalidated = invalidated
        tls = configuration.tls == nil ? nil : shared ?? configuration.tls.flatMap { options in try? RedisTLSContext(options) }
    }

    /// Starts the thread (not Foundation's queues: it blocks on the socket).
    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "swift-http-caching.redis-invalidations"
        thread.start()
    }

    /// Ends the thread within about 100 ms; tracking ends with its connection.
    func stop() { stopped.store(true, ordering: .releasing) }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func run() {
        while !isStopped {
            try? session()
            lost()
            let retry = Deadline(after: max(configuration.retryDelay, 0.01))
            while !isStopped && retry.remainingMilliseconds > 0 { usleep(UInt32(min(retry.remainingMilliseconds, 50)) * 1000) }
        }
    }

    /// One connection: tracking on, then messages until it fails or the listener stops.
    private func session() throws(RedisClientError) {
        let limits = RESPParser.Limits(maxBulkLength: 1 << 20, maxArrayCount: 1 << 20, maxDepth: 4,
                                       maxLineLength: 64 << 10, maxReplyBytes: 256 << 20)
        if configuration.tls != nil && tls == nil {
            throw RedisClientError(.handshake, "TLS was asked for and its context could not be made")
        }
        let connection = try RedisConnection.open(configuration, limits: limits, tls: tls)
        defer { connection.close() }
        let timeout = configuration.commandTimeout
        guard case .integer(let id) = try connection.execute([RedisCommand("CLIENT", "ID")], timeout: timeout)[0] else {
            throw RedisClientError(.protocolViolation, "an unexpected reply to CLIENT ID")
        }
        let replies = try connection.execute([RedisCommand("CLIENT", "TRACKING", "on", "REDIRECT", Int(id), "BCAST", "PREFIX", prefix),
                                              RedisCommand("SUBSCRIBE", Self.channel)], timeout: timeout)
        guard replies[0].isOK, case .array(let confirmation?) = replies[1], confirmation.first?.bytes == Array("subscribe".utf8) else {
            throw RedisClientError(.handshake, "Redis refused client tracking: \(replies[0].errorMessage ?? replies[1].errorMessage ?? "an unexpected reply")")
        }
        up()
        var quiet = Deadline(after: Self.heartbeat)
        var pingDeadline: Deadline?
        while !isStopped {
            guard let value = try connection.read(within: 0.1) else {
                if let pingDeadline, pingDeadline.remainingMilliseconds == 0 {
                    throw RedisClientError(.timeout, "no answer to PING on the invalidation connection")
                }
                if pingDeadline == nil && quiet.remainingMilliseconds == 0 {
                    try connection.send([RedisCommand("PING")], timeout: timeout)
                    pingDeadline = Deadline(after: timeout)
                }
                continue
            }
            quiet = Deadline(after: Self.heartbeat)
            pingDeadline = nil
            try handle(value)
        }
    }

    static let channel = Array("__redis__:invalidate".utf8)

    /// Passes on an invalidation message; a pong or another channel's message is ignored.
    private func handle(_ value: RESPValue) throws(RedisClientError) {
        guard case .array(let parts?) = value, parts.count == 3, parts[0].bytes == Array("message".utf8),
              parts[1].bytes == Self.channel else {
            if case .error(let message) = value { throw RedisClientError(.protocolViolation, "Redis sent an error: \(message)") }
            return
        }
        switch parts[2] {
        case .array(let keys?): invalidated(keys.compactMap(\.bytes))
        case .bulkString(let key?): invalidated([key])
        default: invalidated(nil) // a flush: every key
        }
    }
}
