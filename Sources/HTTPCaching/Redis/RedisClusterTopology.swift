/// Which primary serves each hash slot of a Redis Cluster, as one node told it: parsed from
/// `CLUSTER SHARDS` (Redis 7 and later) or `CLUSTER SLOTS` (older servers).
///
/// A node's address is its preferred endpoint (`endpoint`, the `cluster-preferred-endpoint-type`
/// the cluster announces), else its `ip`; an endpoint that is unknown (null, empty or `?`)
/// means the host of the node that was asked, with the port given. Replicas are listed among
/// the nodes, to ask for the topology another time, never to send commands to.
struct RedisClusterTopology: Equatable, Sendable {
    /// Slots `first...last`, served by `primary`.
    struct SlotRange: Equatable, Sendable {
        var first: Int
        var last: Int
        var primary: RedisNodeAddress
    }

    /// Every range some primary serves; slots in none are not served at the moment.
    var ranges: [SlotRange]
    /// Every node named, primaries first.
    var nodes: [RedisNodeAddress]
    /// Every primary named, those serving no slot yet included (a node that joined to import
    /// slots: `CLUSTER SHARDS` names it, `CLUSTER SLOTS` does not).
    var masters: [RedisNodeAddress]

    /// The primaries that serve at least one slot, each once, in the order of their first range.
    var primaries: [RedisNodeAddress] { Self.unique(ranges.map(\.primary)) }

    /// How many slots some primary serves.
    var coveredSlotCount: Int { ranges.reduce(0) { $0 + $1.last - $1.first + 1 } }

    init(ranges: [SlotRange], nodes: [RedisNodeAddress], masters: [RedisNodeAddress]? = nil) {
        self.ranges = ranges
        self.nodes = nodes
        self.masters = masters ?? Self.unique(ranges.map(\.primary))
    }

    /// The topology in a `CLUSTER SHARDS` reply: an array of shards, each a map of `slots`
    /// (pairs of first and last slot) and `nodes` (maps of `id`, `port`, `tls-port`, `ip`,
    /// `endpoint`, `role`, `health`, ...). A shard's primary is its node whose role is
    /// `master`; a shard with none (between a primary's failure and a replica's promotion it
    /// still has one, marked failed) serves nothing. A failed `master` is passed over for
    /// another in its shard, and one serving no slot is not among `masters`. With `tls`, a
    /// node's `tls-port` is used where it has one (a cluster with `tls-cluster yes`), else its
    /// `port`.
    /// - Throws: `RedisClientError` of kind `.protocolViolation` for a reply of another shape.
    init(shards reply: RESPValue, askedHost: String, tls: Bool = false) throws(RedisClientError) {
        guard case .array(let shards?) = reply else { throw Self.malformed("CLUSTER SHARDS", reply) }
        var ranges: [SlotRange] = [], primaries: [RedisNodeAddress] = [], replicas: [RedisNodeAddress] = []
        var masters: [RedisNodeAddress] = []
        for shard in shards {
            let fields = try Self.map(shard, "CLUSTER SHARDS")
            guard case .array(let slots?) = fields["slots"] ?? .array([]), slots.count % 2 == 0,
                  case .array(let nodes?) = fields["nodes"] ?? .array([]) else { throw Self.malformed("CLUSTER SHARDS", shard) }
            let (found, others) = try Self.primary(among: nodes, askedHost: askedHost, tls: tls)
            replicas += others
            guard let primary = found.address else { continue }
            primaries.append(primary)
            // A failed primary serving no slot (one replaced by its replica, kept in the node
            // table until it returns) is no primary to follow.
            if !found.failed || !slots.isEmpty { masters.append(primary) }
            for index in stride(from: 0, to: slots.count, by: 2) {
                guard let first = Self.integer(slots[index]), let last = Self.integer(slots[index + 1]),
                      0 <= first, first <= last, last < RedisClusterSlot.count else { throw Self.malformed("CLUSTER SHARDS", shard) }
                ranges.append(SlotRange(first: first, last: last, primary: primary))
            }
        }
        self.init(ranges: ranges, nodes: Self.unique(primaries + replicas), masters: Self.unique(masters))
    }

    /// A shard's primary: its first node whose role is `master` and whose health is not failed
    /// (Redis 7.2 lists a failed primary in the shard of the replica that replaced it), else
    /// its first failed one; and every other node.
    private static func primary(among nodes: [RESPValue], askedHost: String, tls: Bool) throws(RedisClientError)
        -> (primary: (address: RedisNodeAddress?, failed: Bool), others: [RedisNodeAddress]) {
        var healthy: RedisNodeAddress?, failed: RedisNodeAddress?, others: [RedisNodeAddress] = []
        for node in nodes {
            let node = try map(node, "CLUSTER SHARDS")
            let port = (tls ? node["tls-port"].flatMap(integer) : nil) ?? node["port"].flatMap(integer)
            guard let port, let address = address(endpoint: node["endpoint"]?.bytes, ip: node["ip"]?.bytes, port: port,
                                                  askedHost: askedHost) else { continue }
            let text = { (name: String) in node[name]?.bytes.map { String(decoding: $0, as: UTF8.self) } }
            let isFailed = ["fail", "failed"].contains(text("health"))
            if text("role") == "master" && !isFailed && healthy == nil {
                healthy = address
            } else if text("role") == "master" && isFailed && failed == nil {
                failed = address
            } else {
                others.append(address)
            }
        }
        if healthy != nil, let failed { others.append(failed) }
        return ((healthy ?? failed, healthy == nil && failed != nil), others)
    }

    /// The topology in a `CLUSTER SLOTS` reply: an array of ranges, each its first and last
    /// slot, then its primary and its replicas as `[endpoint, port, id, ...]`. The ports are
    /// those of the asking connection's kind: a TLS connection is given TLS ports.
    /// - Throws: `RedisClientError` of kind `.protocolViolation` for a reply of another shape.
    init(slots reply: RESPValue, askedHost: String) throws(RedisClientError) {
        guard case .array(let entries?) = reply else { throw Self.malformed("CLUSTER SLOTS", reply) }
        var ranges: [SlotRange] = [], primaries: [RedisNodeAddress] = [], replicas: [RedisNodeAddress] = []
        for entry in entries {
            guard case .array(let parts?) = entry, parts.count >= 3, let first = Self.integer(parts[0]),
                  let last = Self.integer(parts[1]), 0 <= first, first <= last, last < RedisClusterSlot.count else {
                throw Self.malformed("CLUSTER SLOTS", entry)
            }
            var addresses: [RedisNodeAddress] = []
            for node in parts[2...] {
                guard case .array(let fields?) = node, fields.count >= 2, let port = Self.integer(fields[1]) else {
                    throw Self.malformed("CLUSTER SLOTS", entry)
                }
                if let address = Self.address(endpoint: fields[0].bytes, ip: nil, port: port, askedHost: askedHost) {
                    addresses.append(address)
                }
            }
            guard let primary = addresses.first else { continue }
            ranges.append(SlotRange(first: first, last: last, primary: primary))
            primaries.append(primary)
            replicas += addresses.dropFirst()
        }
        self.init(ranges: ranges, nodes: Self.unique(primaries + replicas))
    }

    // MARK: - Parsing helpers

    /// A node's address from its preferred endpoint, else its IP, else the host asked.
    private static func address(endpoint: [UInt8]?, ip: [UInt8]?, port: Int, askedHost: String) -> RedisNodeAddress? {
        guard (1...65_535).contains(port) else { return nil }
        func known(_ bytes: [UInt8]?) -> String? {
            guard let bytes, !bytes.isEmpty, bytes != [UInt8(ascii: "?")] else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        return RedisNodeAddress(host: known(endpoint) ?? known(ip) ?? askedHost, port: port)
    }

    /// A RESP2 map: an array of alternating names and values.
    private static func map(_ value: RESPValue, _ command: String) throws(RedisClientError) -> [String: RESPValue] {
        guard case .array(let items?) = value, items.count % 2 == 0 else { throw malformed(command, value) }
        var fields: [String: RESPValue] = [:]
        for index in stride(from: 0, to: items.count, by: 2) {
            guard let name = items[index].bytes else { throw malformed(command, value) }
            fields[String(decoding: name, as: UTF8.self)] = items[index + 1]
        }
        return fields
    }

    /// An integer reply, or a bulk string of decimal digits.
    private static func integer(_ value: RESPValue) -> Int? {
        if case .integer(let number) = value { return Int(exactly: number) }
        return value.bytes.flatMap { Int(String(decoding: $0, as: UTF8.self)) }
    }

    private static func unique(_ addresses: [RedisNodeAddress]) -> [RedisNodeAddress] {
        var seen = Set<RedisNodeAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }

    private static func malformed(_ command: String, _ value: RESPValue) -> RedisClientError {
        RedisClientError(.protocolViolation, "an unexpected reply to \(command): \(value.errorMessage ?? String(describing: value).prefix(200).description)")
    }
}
