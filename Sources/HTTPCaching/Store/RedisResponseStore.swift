import Foundation
import Synchronization

/// A store in Redis, shared by every process and host that uses the same server (or Redis
/// Cluster) and key prefix: entries, the partition secret and background-refresh claims.
///
/// Each entry is one Redis hash (a small metadata field and the encoded entry) whose time to
/// live is how long the entry can still be of use: `usefulUntil - storedAt`, capped by
/// `maximumTimeToLive`, and the cap itself when `usefulUntil` is nil. Size limits are
/// Redis's own: set `maxmemory` and an LRU `maxmemory-policy` on the server (`volatile-lru`
/// keeps the secret, which has no time to live; `allkeys-lru` may evict it, costing
/// credentialed entries their hits). Writes therefore never report evictions.
///
/// A server that is down, refuses the credentials or does not answer within the timeouts
/// makes calls throw `HTTPCachingError.unavailable(reason:)` promptly; the store reconnects
/// by itself when the server is back. A value under the prefix that is not an entry of this
/// store is removed and reported as `HTTPCachingError.corruptEntry`.
///
/// `entryCount`, `totalBytes` and the listing and removal calls walk the keys with `SCAN`
/// (never `KEYS`), on every primary of a cluster: their cost grows with the number of keys in
/// the database, so keep them off the request path. `rediss://` (`RedisConfiguration.tls`)
/// speaks TLS with the system's OpenSSL 3, verifying the server's certificate.
///
/// On a Redis Cluster (`RedisConfiguration.isCluster`, or a `redis-cluster://` URL) each
/// command goes to the primary serving its key's hash slot (see `RedisEntryLayout` for the
/// hash tags that keep an entry's keys on one node), following `MOVED` and `ASK`. While a
/// primary is down its keys' calls throw `unavailable` at once (the cache then answers from
/// the network and reports `storeFailed`); once a replica has taken its place the store finds
/// it by itself. Replicas are never read.
///
/// With Redis Sentinel (`RedisConfiguration.sentinelMasterName`, or a `redis-sentinel://` URL)
/// the store asks the sentinels for the primary, checks each new connection's `ROLE` (a node
/// that says it is a replica is never used), and asks again after a failure or a `-READONLY`
/// reply, and every second while calls are made: while the primary is down calls throw
/// `unavailable` at once, and once a sentinel has promoted the replica the store follows.
///
/// A `TieredResponseStore` in front of a store on one server is a near cache: hits from this
/// process's memory, kept coherent with every other process through Redis's client-side caching.
public final class RedisResponseStore: ResponseStore {
    /// The server, credentials, prefix, timeouts and limits.
    public let configuration: RedisConfiguration
    /// The transform bodies are stored with (compression, encryption); nil stores them as they
    /// are. Entries written with another transform, or none, are misses. The default is nil.
    public let transform: (any StoreTransform)?

    let backend: RedisBackend
    let layout: RedisEntryLayout
    /// The metadata of entries read recently, decoded once.
    private let decodedMetadata = MetadataCache<CacheKey>()
    private let secret = Mutex<[UInt8]?>(nil)
    /// The tokens of the claims this store holds, by claim key.
    private let claims = Mutex<[[UInt8]: [UInt8]]>([:])

    /// How many keys one `SCAN` call asks for, and how many commands one pipeline carries.
    static let batchSize = 500

    /// A store on the server a configuration names. It connects on first use, so it can be
    /// made while the server is down. With `tls` set it loads OpenSSL and reads the certificate
    /// files at once.
    /// - Throws: `HTTPCachingError.invalidValue` for a field out of range or a certificate file
    ///   that cannot be read, `.unavailable` when `tls` is set and OpenSSL 3 (`libssl.so.3`)
    ///   cannot be loaded: install the `libssl3` package.
    public init(configuration: RedisConfiguration, transform: (any StoreTransform)? = nil) throws(HTTPCachingError) {
        try configuration.validate()
        let tls = try configuration.tls.map { options throws(HTTPCachingError) in try RedisTLSContext(options) }
        self.configuration = configuration
        self.transform = transform
        layout = RedisEntryLayout(prefix: configuration.keyPrefix)
        // Replies are bounded by what this store writes: an entry is at most maxEntrySize,
        // and its encoding adds a few bytes per header field.
        let largest = min(configuration.maxEntrySize, 512 << 20) // Redis's own proto-max-bulk-len
        let bulk = largest + largest / 2 + (1 << 20)
        let limits = RESPParser.Limits(maxBulkLength: bulk, maxArrayCount: 1 << 20, maxDepth: 4,
                                       maxLineLength: 64 << 10, maxReplyBytes: 2 * bulk + (1 << 20))
        backend = configuration.isCluster ? .cluster(RedisClusterRouter(configuration: configuration, limits: limits, tls: tls))
            : configuration.isSentinel ? .sentinel(RedisSentinelRouter(configuration: configuration, limits: limits))
            : .server(RedisConnectionPool(configuration: configuration, limits: limits, tls: tls))
    }

    /// A store on the server a URL names, `redis://[user:password@]host:port[/db]`, on the
    /// cluster `redis-cluster://[user:password@]host:port[,host:port...]` (over TLS with
    /// `rediss://` and `rediss-cluster://`, `?cacert=PATH` for a private CA), or on the primary
    /// the sentinels name, `redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername`
    /// (the credentials are the data nodes'; sentinels with a password of their own need
    /// `init(configuration:)` and `RedisConfiguration.sentinelPassword`), with the other
    /// settings at their defaults.
    /// - Throws: `HTTPCachingError.invalidURL` saying what is wrong with the URL; for TLS,
    ///   `.invalidValue` when a certificate file cannot be read and `.unavailable` when
    ///   OpenSSL 3 cannot be loaded (install `libssl3`).
    public convenience init(url: String, keyPrefix: String = RedisConfiguration.defaultKeyPrefix,
                            transform: (any StoreTransform)? = nil) throws(HTTPCachingError) {
        try self.init(configuration: RedisConfiguration(url: url, keyPrefix: keyPrefix), transform: transform)
    }

    /// The largest entry stored (`RedisConfiguration.maxEntrySize`). The default is 8 MiB.
    public var maxEntrySize: Int { configuration.maxEntrySize }

    /// Checks that the server (every primary of a cluster) answers `PING` with the configured
    /// credentials and database.
    /// - Throws: `HTTPCachingError.unavailable` saying why not.
    public func ping() throws {
        let replies = try call { () throws(RedisClientError) in
            var replies: [RESPValue] = []
            for node in try backend.everyNode() { replies.append(try node.execute(RedisCommand("PING"))) }
            return replies
        }
        if let reply = replies.first(where: { $0 != .simpleString("PONG") }) { throw unexpected(reply, to: "PING") }
    }

    // MARK: - Entries

    /// The entry stored under a key, or nil. Redis counts the read as a use for its LRU.
    /// - Throws: `HTTPCachingError.corruptEntry` for a value under the key that is not an
    ///   entry of this store (it is removed), `.unavailable` when Redis cannot answer.
    public func entry(for key: CacheKey) throws -> CacheEntry? {
        let redisKey = layout.entryKey(key)
        let reply: RESPValue
        do {
            reply = try backend.execute(RedisCommand("HMGET", redisKey, "m", "d"), key: redisKey)
        } catch where error.kind == .replyTooLarge {
            throw corrupt(key, redisKey, "a value larger than any this store writes")
        } catch {
            throw HTTPCachingError.unavailable(reason: error.description)
        }
        if let message = reply.errorMessage {
            if message.hasPrefix("WRONGTYPE") { throw corrupt(key, redisKey, "a foreign value of another type") }
            throw HTTPCachingError.unavailable(reason: "Redis refused HMGET: \(message)")
        }
        guard case .array(let fields?) = reply, fields.count == 2 else { throw unexpected(reply, to: "HMGET") }
        switch (fields[0], fields[1]) {
        case (.bulkString(nil), .bulkString(nil)):
            return nil
        case (.bulkString(let metadataBytes?), .bulkString(let data?)):
            return try decode(key, redisKey, metadataBytes, data)
        default:
            throw corrupt(key, redisKey, "a hash without both of its fields")
        }
    }

    private func decode(_ key: CacheKey, _ redisKey: [UInt8], _ metadataBytes: [UInt8], _ data: [UInt8]) throws -> CacheEntry? {
        let metadata: RedisEntryMetadata
        do {
            metadata = try RedisEntryMetadata(decoding: metadataBytes)
        } catch {
            throw corrupt(key, redisKey, "metadata: \(error.description)")
        }
        guard metadata.storageString == key.storageString else {
            throw corrupt(key, redisKey, "the value holds another key")
        }
        var entry: CacheEntry
        let storedTransform: String?
        do {
            (entry, storedTransform) = try decodeEntry(data, expecting: key)
        } catch {
            throw corrupt(key, redisKey, error.description)
        }
        guard storedTransform == transform?.name else { return nil } // another transform's entry: a miss
        guard entry.key.method == key.method, entry.key.url == key.url, entry.storedAt == metadata.storedAt,
              entry.statusCode == metadata.statusCode else {
            throw corrupt(key, redisKey, "the metadata and the entry disagree")
        }
        // The metadata carries the whole key and the fields listing needs; they are the
        // entry's own, written with it.
        entry.key = key
        entry.generation = metadata.generation
        entry.usefulUntil = metadata.usefulUntil
        if let transform {
            do {
                entry.body = try transform.decode(entry.body)
            } catch {
                throw HTTPCachingError.unavailable(reason: "the store's transform could not decode the body: \(transform.name): \(error)")
            }
        }
        return entry
    }

    /// An entry's encoding decoded, expecting the key asked for (a value holding another key is
    /// `.keyMismatch`), its metadata reused when the same bytes were decoded before; the body
    /// the one copy made.
    private func decodeEntry(_ data: [UInt8], expecting key: CacheKey) throws(EntryFileFormat.DecodeError) -> (CacheEntry, String?) {
        let expected = (key: key, bytes: EntryName.storageBytes(of: key))
        let result = data.withUnsafeBytes { raw -> Result<(Int, EntryFileFormat.Metadata), EntryFileFormat.DecodeError> in
            do throws(EntryFileFormat.DecodeError) { return .success(try decodedMetadata.decode(raw, name: key, expecting: expected)) }
            catch { return .failure(error) }
        }
        let (bodyLength, decoded) = try result.get()
        var entry = decoded.entry
        entry.body = Data(data.prefix(bodyLength))
        return (entry, decoded.transform)
    }

    /// Stores an entry with its time to live (see the type's summary), replacing any earlier
    /// one in one transaction. Not stored (and the earlier one removed): an entry over
    /// `maxEntrySize`, one already of no use, or any entry while Redis is out of memory under
    /// `maxmemory-policy noeviction`. Never reports evictions: Redis evicts on its own.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer or refuses the write.
    @discardableResult
    public func write(_ entry: CacheEntry) throws -> StoreWriteResult {
        let redisKey = layout.entryKey(entry.key)
        guard entry.byteCount <= maxEntrySize,
              let milliseconds = RedisEntryLayout.timeToLive(of: entry, cap: configuration.maximumTimeToLive) else {
            try unlink([redisKey])
            return StoreWriteResult(stored: false)
        }
        var stored = entry
        if let transform { stored.body = try transform.encode(entry.body) }
        let data = EntryFileFormat.encode(stored, transform: transform?.name)
        let replies = try call { () throws(RedisClientError) in
            try backend.execute([RedisCommand("MULTI"),
                                 RedisCommand("UNLINK", redisKey),
                                 RedisCommand("HSET", redisKey, "m", RedisEntryMetadata(entry).encoded, "d", data),
                                 RedisCommand("PEXPIRE", redisKey, milliseconds),
                                 RedisCommand("EXEC")], key: redisKey)
        }
        if let message = replies.lazy.compactMap(\.errorMessage).first {
            if message.hasPrefix("OOM") {
                try unlink([redisKey]) // allowed when out of memory, and frees some
                return StoreWriteResult(stored: false, notStoredReason: .storeFull)
            }
            throw HTTPCachingError.unavailable(reason: "Redis refused the write: \(message)")
        }
        guard case .array(let results?) = replies[4], results.count == 3 else { throw unexpected(replies[4], to: "EXEC") }
        if let message = results.lazy.compactMap(\.errorMessage).first {
            throw HTTPCachingError.unavailable(reason: "Redis refused the write: \(message)")
        }
        return StoreWriteResult(stored: true)
    }

    /// Removes the entry stored under a key, if any.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer.
    public func removeEntry(for key: CacheKey) throws {
        try unlink([layout.entryKey(key)])
    }

    // MARK: - Secret and claims

    /// The partition secret: 32 random bytes under `<prefix>secret`, with no time to live,
    /// created by the first store to ask (`SET NX`) and shared by every store on the prefix;
    /// kept in memory after the first read.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer, or holds a value
    ///   there that is not a secret.
    public func partitionSecret() throws -> [UInt8] {
        if let known = secret.withLock({ $0 }) { return known }
        let candidate = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        let key = layout.secretKey
        let replies = try call { () throws(RedisClientError) in
            try backend.execute([RedisCommand("SET", key, candidate, "NX"), RedisCommand("GET", key)], key: key)
        }
        guard case .bulkString(let value?) = replies[1], value.count == 32 else {
            let reason = replies.lazy.compactMap(\.errorMessage).first.map { "Redis refused it: \($0)" }
                ?? "the value there is not a 32-byte secret; delete the key to make a new one"
            throw HTTPCachingError.unavailable(reason: "cannot read the partition secret at \(String(decoding: key, as: UTF8.self)): \(reason)")
        }
        return secret.withLock { known in
            if known == nil { known = value }
            return known!
        }
    }

    /// Claims a key's background refresh for every store on the prefix: `SET <prefix>claim:…
    /// <random token> NX PX <lease>`. False when another holder has it, or when Redis cannot
    /// answer (no refresh then, so a failing server is not met with a herd of them).
    public func claimRefresh(of key: CacheKey, lease: TimeInterval) -> Bool {
        claim(key, lease: lease) == .won
    }

    /// `claimRefresh(of:lease:)`, saying whether a refusal is another holder's claim (`SET NX`
    /// set nothing) or one Redis could not record (no answer, or an error such as OOM).
    func claim(_ key: CacheKey, lease: TimeInterval) -> ClaimOutcome {
        let claimKey = layout.claimKey(key)
        let token = Array(SHA256.hex((0..<16).map { _ in UInt8.random(in: .min ... .max) }).utf8)
        // A lease of at least a millisecond and at most a year (NaN: a millisecond).
        let seconds = lease.isNaN ? 0.001 : min(max(lease, 0.001), 365 * 86_400)
        let milliseconds = Int((seconds * 1000).rounded(.up))
        guard let reply = try? backend.execute(RedisCommand("SET", claimKey, token, "NX", "PX", milliseconds), key: claimKey) else {
            return .failed
        }
        guard reply.isOK else { return reply.errorMessage == nil ? .heldElsewhere : .failed }
        claims.withLock { $0[claimKey] = token }
        return .won
    }

    /// Gives a claim back: deletes it only if it still holds this store's token (a claim whose
    /// lease ran out may be another holder's by now).
    public func releaseRefresh(of key: CacheKey) {
        let claimKey = layout.claimKey(key)
        guard let token = claims.withLock({ $0.removeValue(forKey: claimKey) }) else { return }
        // If Redis cannot answer, the lease runs out by itself.
        _ = try? backend.execute(RedisCommand("EVAL", RedisEntryLayout.deleteIfTokenMatches, 1, claimKey, token), key: claimKey)
    }

    // MARK: - Helpers

    func unlink(_ keys: [[UInt8]]) throws {
        guard !keys.isEmpty else { return }
        let refusal = try call { () throws(RedisClientError) in try backend.unlink(keys) }
        if let message = refusal { throw HTTPCachingError.unavailable(reason: "Redis refused UNLINK: \(message)") }
    }

    /// Removes a damaged or foreign value (if Redis answers) and makes the error reporting it.
    private func corrupt(_ key: CacheKey, _ redisKey: [UInt8], _ reason: String) -> HTTPCachingError {
        do {
            try unlink([redisKey])
        } catch {
            return .unavailable(reason: "found a damaged entry for \(key) (\(reason)) but could not remove it: \(error)")
        }
        return .corruptEntry(key: key, reason: reason)
    }

    func unexpected(_ reply: RESPValue, to command: String) -> HTTPCachingError {
        .unavailable(reason: reply.errorMessage.map { "Redis refused \(command): \($0)" } ?? "an unexpected reply to \(command)")
    }

    /// Runs Redis calls, reporting a failure as `HTTPCachingError.unavailable`.
    func call<T>(_ body: () throws(RedisClientError) -> T) throws(HTTPCachingError) -> T {
        do {
            return try body()
        } catch {
            throw .unavailable(reason: error.description)
        }
    }
}

extension RedisResponseStore: ReportingClaims {}
