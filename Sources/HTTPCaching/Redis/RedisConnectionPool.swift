import Foundation
import Synchronization

/// Up to `poolSize` connections to one Redis server, handed to one caller at a time.
///
/// A caller waits at most `commandTimeout` for a free connection. An idle connection is
/// checked before it is handed out (a restarted server has closed it) and a connection that
/// failed is closed, never returned. When connecting fails, calls fail at once with the same
/// reason for `retryDelay`, then the next call tries again: the pool reconnects by itself
/// when the server is back. The locks guard only the list of idle connections and the last
/// failure; connecting and talking to the server happen outside them.
///
/// A pool that `verifiesPrimary` (the primary a sentinel named) asks each new connection's
/// server for its role and refuses a replica (`RedisClientError.Kind.replica`), so nothing is
/// ever read from or written to a node that says it is not the primary.
final class RedisConnectionPool: Sendable {
    let configuration: RedisConfiguration
    let limits: RESPParser.Limits
    /// The TLS context every connection's session is made from; nil for plain TCP.
    let tls: RedisTLSContext?
    let verifiesPrimary: Bool
    private let permits: DispatchSemaphore
    private let idle = Mutex<[RedisConnection]>([])
    private let lastFailure = Mutex<(error: RedisClientError, until: UInt64)?>(nil)

    init(configuration: RedisConfiguration, limits: RESPParser.Limits, tls: RedisTLSContext?, verifiesPrimary: Bool = false) {
        self.configuration = configuration
        self.limits = limits
        self.tls = tls
        self.verifiesPrimary = verifiesPrimary
        permits = DispatchSemaphore(value: configuration.poolSize)
    }

    /// Sends the commands on one connection (pipelined) and returns their replies in order.
    /// - Throws: `RedisClientError` when no connection can be had or the replies do not arrive.
    func execute(_ commands: [RedisCommand]) throws(RedisClientError) -> [RESPValue] {
        try withConnection { connection throws(RedisClientError) in
            try connection.execute(commands, timeout: configuration.commandTimeout)
        }
    }

    /// Sends one command and returns its reply.
    /// - Throws: `RedisClientError` when no connection can be had or the reply does not arrive.
    func execute(_ command: RedisCommand) throws(RedisClientError) -> RESPValue {
        try execute([command])[0]
    }

    /// Runs `body` with a connection of its own, then returns the connection to the pool,
    /// unless it broke.
    /// - Throws: `RedisClientError` when no connection can be had, or what `body` throws.
    func withConnection<T>(_ body: (RedisConnection) throws(RedisClientError) -> T) throws(RedisClientError) -> T {
        guard permits.wait(timeout: .now() + configuration.commandTimeout) == .success else {
            throw RedisClientError(.timeout, "all \(configuration.poolSize) Redis connections stayed busy for \(configuration.commandTimeout) s")
        }
        defer { permits.signal() }
        let (connection, reused) = try checkOut()
        do throws(RedisClientError) {
            defer { checkIn(connection) }
            return try body(connection)
        } catch where reused && error.beforeAnyReply {
            // An idle connection the server closed just before it was handed out: the check
            // cannot see a close still on its way. Nothing was answered: once more, on a new one.
            let fresh = try open()
            defer { checkIn(fresh) }
            return try body(fresh)
        }
    }

    /// Closes the idle connections, so the next calls open (and check) new ones.
    func discardIdleConnections() {
        let discarded = idle.withLock { idle in
            defer { idle = [] }
            return idle
        }
        for connection in discarded { connection.close() }
    }

    /// An idle connection that still looks open (reused), else a new one.
    private func checkOut() throws(RedisClientError) -> (connection: RedisConnection, reused: Bool) {
        while let connection = idle.withLock({ $0.popLast() }) {
            if connection.isUsableWhenIdle { return (connection, true) }
            connection.close()
        }
        return (try open(), false)
    }

    /// A new connection, unless a recent failure is still being waited out.
    private func open() throws(RedisClientError) -> RedisConnection {
        let now = DispatchTime.now().uptimeNanoseconds
        if let failure = lastFailure.withLock({ $0 }), now < failure.until {
            throw failure.error
        }
        do {
            let connection = try RedisConnection.open(configuration, limits: limits, tls: tls)
            if verifiesPrimary { try connection.requirePrimary(configuration) }
            lastFailure.withLock { $0 = nil }
            return connection
        } catch {
            let until = DispatchTime.now().uptimeNanoseconds &+ UInt64(configuration.retryDelay * 1e9)
            let remembered = RedisClientError(error.kind, error.description + (configuration.retryDelay > 0
                ? " (calls fail at once for \(configuration.retryDelay) s before the next attempt)" : ""))
            lastFailure.withLock { $0 = (remembered, until) }
            throw error
        }
    }

    private func checkIn(_ connection: RedisConnection) {
        guard !connection.isBroken else { return }
        idle.withLock { $0.append(connection) }
    }
}
