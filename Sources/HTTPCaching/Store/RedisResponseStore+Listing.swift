import Foundation

/// Listing and removal: every entry's key and metadata found with `SCAN`.
extension RedisResponseStore {
    /// Removes every entry under the prefix (not the secret, not claims): one `SCAN` to count
    /// them (of every primary of a cluster), then `UNLINK` in batches, reporting after each.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer.
    public func removeAll(progress: (RemovalProgress) -> Void) throws {
        let keys = try entryKeys()
        progress(RemovalProgress(removed: 0, total: keys.count))
        var removed = 0
        for start in stride(from: 0, to: keys.count, by: Self.batchSize) {
            let batch = Array(keys[start..<min(start + Self.batchSize, keys.count)])
            try unlink(batch)
            removed += batch.count
            progress(RemovalProgress(removed: removed, total: keys.count))
        }
    }

    /// Removes every entry whose metadata satisfies `predicate`. The metadata is listed first
    /// (without bodies); an entry replaced since it was listed is kept.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer.
    public func removeEntries(where predicate: (StoredEntryInfo) -> Bool, progress: (RemovalProgress) -> Void) throws {
        let chosen = try listMetadata().filter { predicate($0.info) }
        progress(RemovalProgress(removed: 0, total: chosen.count))
        var removed = 0
        for start in stride(from: 0, to: chosen.count, by: Self.batchSize) {
            let batch = chosen[start..<min(start + Self.batchSize, chosen.count)]
            let replies = try call { () throws(RedisClientError) in
                try backend.executeEach(batch.map {
                    RedisCommand("EVAL", RedisEntryLayout.deleteIfMetadataMatches, 1, $0.redisKey, $0.metadata)
                }, keys: batch.map(\.redisKey))
            }
            if let message = replies.lazy.compactMap(\.errorMessage).first(where: { !$0.hasPrefix("WRONGTYPE") }) {
                throw HTTPCachingError.unavailable(reason: "Redis refused a removal: \(message)")
            }
            removed += batch.count
            progress(RemovalProgress(removed: removed, total: chosen.count))
        }
    }

    /// The metadata of every entry, read from each entry's small metadata field (never the
    /// body), a `SCAN` batch at a time. Values under the prefix that are not entries are removed.
    /// - Throws: `HTTPCachingError.unavailable` when Redis cannot answer.
    public func entryInfos() throws -> [StoredEntryInfo] {
        try listMetadata().map(\.info)
    }

    /// The bytes the entries account for, summed from their metadata with `SCAN`; 0 when
    /// Redis cannot answer.
    public var totalBytes: Int {
        (try? listMetadata(removingForeign: false).reduce(0) { $0 + $1.info.byteCount }) ?? 0
    }

    /// How many entries are stored (keys under `<prefix>e`), counted with `SCAN`; 0 when Redis
    /// cannot answer.
    public var entryCount: Int {
        (try? entryKeys().count) ?? 0
    }

    struct Listed {
        let redisKey: [UInt8]
        let metadata: [UInt8]
        let info: StoredEntryInfo
    }

    /// Every entry's metadata: `SCAN`, then one pipelined `HGET m` per batch of keys. Entries
    /// written in another version of `EntryFileFormat` are listed (their metadata is the same);
    /// metadata of another version is skipped.
    func listMetadata(removingForeign: Bool = true) throws -> [Listed] {
        var listed: [Listed] = []
        var foreign: [[UInt8]] = []
        try scanEntryKeys { batch throws(RedisClientError) in
            let replies = try backend.executeEach(batch.map { RedisCommand("HGET", $0, "m") }, keys: batch)
            for (redisKey, reply) in zip(batch, replies) {
                switch reply {
                case .bulkString(nil):
                    continue // expired or removed since the scan
                case .bulkString(let bytes?):
                    do throws(RedisEntryMetadata.DecodeError) {
                        if let info = try RedisEntryMetadata(decoding: bytes).info {
                            listed.append(Listed(redisKey: redisKey, metadata: bytes, info: info))
                        } else {
                            foreign.append(redisKey)
                        }
                    } catch where error.isOtherVersion {
                        continue // another version's entry: neither listed nor removed
                    } catch {
                        foreign.append(redisKey)
                    }
                case .error(let message) where message.hasPrefix("WRONGTYPE"):
                    foreign.append(redisKey)
                default:
                    throw RedisClientError(.protocolViolation, "unexpected reply to HGET: \(reply)")
                }
            }
        }
        if removingForeign && !foreign.isEmpty { try unlink(foreign) }
        return listed
    }

    /// Every entry key under the prefix, each once.
    func entryKeys() throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        try scanEntryKeys { keys += $0 }
        return keys
    }

    /// Walks the entry keys with `SCAN cursor MATCH <prefix>e* COUNT n` (on every primary of a
    /// cluster), handing each batch of new keys to `body` (SCAN may repeat a key; each is
    /// handed over once).
    private func scanEntryKeys(_ body: ([[UInt8]]) throws(RedisClientError) -> Void) throws {
        var seen = Set<[UInt8]>()
        try call { () throws(RedisClientError) in
            try backend.scan(matching: layout.entryPattern, count: Self.batchSize) { found throws(RedisClientError) in
                let batch = found.filter { seen.insert($0).inserted }
                if !batch.isEmpty { try body(batch) }
            }
        }
    }
}
