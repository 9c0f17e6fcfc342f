import Foundation
import Testing
@testable import HTTPCaching
@testable import cache_demo
import HTTPCachingTestKit

/// The Redis Cluster parts that need no server: slots, hash tags, topology replies,
/// redirections, `redis-cluster://` URLs and the key layout's tags.
@Suite("Redis Cluster routing, without a server")
struct RedisClusterRoutingTests {
    typealias E = StoreConformance

    @Test("CRC16 is XMODEM (\"123456789\" gives 0x31C3); slots are CRC16 mod 16384 of the key or its hash tag")
    func slots() {
        #expect(RedisClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisClusterSlot.crc16([]) == 0)
        func slot(_ key: String) -> Int { RedisClusterSlot.of(Array(key.utf8)) }
        #expect(slot("foo") == 12_182, "the MOVED example of the Redis documentation")
        #expect(slot("{user1000}.following") == slot("{user1000}.followers"))
        #expect(slot("{user1000}.following") == slot("user1000"))
        #expect(slot("foo{}{bar}") == Int(RedisClusterSlot.crc16(Array("foo{}{bar}".utf8)) % 16_384), "an empty tag: the whole key")
        #expect(slot("foo{{bar}}zap") == slot("{bar"), "the tag ends at the first } after the first {")
        #expect(slot("foo{bar}{zap}") == slot("bar"), "the first tag only")
        #expect(slot("no tag{") == Int(RedisClusterSlot.crc16(Array("no tag{".utf8)) % 16_384))
        #expect((0..<2000).allSatisfy { (0..<16_384).contains(slot("k\($0)")) })
    }

    @Test("CLUSTER SHARDS: each shard's master serves its ranges; an unknown endpoint is the host asked; a shard without a master serves nothing")
    func shardsReply() throws {
        func node(_ endpoint: String?, _ port: Int, _ role: String, ip: String = "10.0.0.9", health: String = "online") -> RESPValue {
            Self.shardNode(endpoint, port, role, ip: ip, health: health)
        }
        let shard = Self.shard
        let reply = RESPValue.array([
            shard([0, 5460, 9000, 9001], [node("10.0.0.1", 7000, "master"), node("10.0.0.4", 7003, "replica")]),
            shard([5461, 8999], [node("?", 7001, "master"), node("10.0.0.5", 7004, "replica")]),
            shard([9002, 16_383], [node("", 7002, "master", ip: "")]),
            shard([], [node("10.0.0.6", 7005, "replica")]),
        ])
        let topology = try RedisClusterTopology(shards: reply, askedHost: "seed.internal")
        #expect(topology.coveredSlotCount == 16_384)
        #expect(topology.primaries == [RedisNodeAddress(host: "10.0.0.1", port: 7000), RedisNodeAddress(host: "10.0.0.9", port: 7001),
                                       RedisNodeAddress(host: "seed.internal", port: 7002)])
        #expect(topology.ranges.map { [$0.first, $0.last] } == [[0, 5460], [9000, 9001], [5461, 8999], [9002, 16_383]])
        #expect(topology.nodes.count == 6)
        #expect(throws: RedisClientError.self) { try RedisClusterTopology(shards: .array([.integer(1)]), askedHost: "h") }
        #expect(throws: RedisClientError.self) { try RedisClusterTopology(shards: .error("ERR nope"), askedHost: "h") }
    }

    static func shardNode(_ endpoint: String?, _ port: Int, _ role: String, ip: String = "10.0.0.9", health: String = "online") -> RESPValue {
        var fields: [RESPValue] = [.bulkString(Array("id".utf8)), .bulkString(Array("abc".utf8)), .bulkString(Array("port".utf8)),
                                   .integer(Int64(port)), .bulkString(Array("ip".utf8)), .bulkString(Array(ip.utf8))]
        fields += [.bulkString(Array("endpoint".utf8)), .bulkString(endpoint.map { Array($0.utf8) })]
        fields += [.bulkString(Array("role".utf8)), .bulkString(Array(role.utf8)), .bulkString(Array("health".utf8)),
                   .bulkString(Array(health.utf8))]
        return .array(fields)
    }

    static func shard(_ slots: [Int64], _ nodes: [RESPValue]) -> RESPValue {
        .array([.bulkString(Array("slots".utf8)), .array(slots.map { .integer($0) }), .bulkString(Array("nodes".utf8)), .array(nodes)])
    }

    @Test("CLUSTER SHARDS: a failed master is passed over for its shard's promoted replica (Redis 7.2), and one serving no slot is no master to follow (7.0); a healthy master serving no slot yet is")
    func failedMasters() throws {
        func node(_ endpoint: String?, _ port: Int, _ role: String, ip: String = "10.0.0.9", health: String = "online") -> RESPValue {
            Self.shardNode(endpoint, port, role, ip: ip, health: health)
        }
        let shard = Self.shard
        let address = { (port: Int) in RedisNodeAddress(host: "10.0.0.1", port: port) }
        let reply = RESPValue.array([
            shard([0, 8191], [node("10.0.0.1", 7000, "master", health: "fail"), node("10.0.0.1", 7003, "master")]),
            shard([8192, 16_383], [node("10.0.0.1", 7001, "master")]),
            shard([], [node("10.0.0.1", 7002, "master", health: "fail")]),
            shard([], [node("10.0.0.1", 7005, "master")]),
        ])
        let topology = try RedisClusterTopology(shards: reply, askedHost: "h")
        #expect(topology.primaries == [address(7003), address(7001)], "slots go to the promoted replica, not the failed master")
        #expect(topology.masters == [address(7003), address(7001), address(7005)])
        #expect(topology.nodes.contains(address(7000)) && topology.nodes.contains(address(7002)), "failed nodes stay known")
        let down = try RedisClusterTopology(shards: .array([shard([0, 16_383], [node("10.0.0.1", 7000, "master", health: "fail")])]),
                                            askedHost: "h")
        #expect(down.primaries == [address(7000)] && down.masters == [address(7000)], "a shard whose only master failed keeps it")
    }

    @Test("CLUSTER SLOTS: the first node of each range is its primary; a null endpoint is the host asked")
    func slotsReply() throws {
        func node(_ host: String?, _ port: Int) -> RESPValue {
            .array([.bulkString(host.map { Array($0.utf8) }), .integer(Int64(port)), .bulkString(Array("id".utf8))])
        }
        let reply = RESPValue.array([
            .array([.integer(0), .integer(8191), node("127.0.0.1", 30_001), node("127.0.0.1", 30_004)]),
            .array([.integer(8192), .integer(16_383), node(nil, 30_002)]),
        ])
        let topology = try RedisClusterTopology(slots: reply, askedHost: "10.1.1.1")
        #expect(topology.primaries == [RedisNodeAddress(host: "127.0.0.1", port: 30_001), RedisNodeAddress(host: "10.1.1.1", port: 30_002)])
        #expect(topology.coveredSlotCount == 16_384 && topology.nodes.count == 3)
        #expect(throws: RedisClientError.self) { try RedisClusterTopology(slots: .array([.array([.integer(9), .integer(3)])]), askedHost: "h") }
    }

    @Test("MOVED and ASK replies: slot, host and port; an empty host is the node that answered; anything else is no redirection")
    func redirections() throws {
        let moved = try #require(Redirection("MOVED 3999 127.0.0.1:6381"))
        #expect(moved.isMoved && moved.slot == 3999 && moved.host == "127.0.0.1" && moved.port == 6381)
        let ask = try #require(Redirection("ASK 12182 [::1]:7000"))
        #expect(!ask.isMoved && ask.host == "::1" && ask.port == 7000)
        #expect(Redirection("MOVED 3999 :6380")?.host == "")
        for text in ["MOVED", "MOVED 99999 h:1", "ASK 1 h", "MOVED x h:1", "ERR MOVED 1 h:1", "CLUSTERDOWN The cluster is down"] {
            #expect(Redirection(text) == nil, "\(text)")
        }
        #expect(Redirection(in: [.simpleString("OK"), .error("MOVED 1 h:2"), .error("EXECABORT")])?.slot == 1)
        #expect(RESPValue.error("ASK 1 h:2").isRedirection && !RESPValue.error("ERR x").isRedirection)
    }

    @Test("redis-cluster:// URLs give every node, credentials and cluster mode", arguments: [
        ("redis-cluster://10.0.0.1:7000", [("10.0.0.1", 7000)], nil, nil),
        ("redis-cluster://a:7000,b:7001,[::1]:7002", [("a", 7000), ("b", 7001), ("::1", 7002)], nil, nil),
        ("REDIS-CLUSTER://:pw@Host", [("host", 6379)], nil, "pw"),
        ("redis-cluster://cache:p%40ss@h1:1,h2:2/", [("h1", 1), ("h2", 2)], "cache", "p@ss"),
        ("redis-cluster://h:1/0", [("h", 1)], nil, nil),
    ] as [(String, [(String, Int)], String?, String?)])
    func clusterURLs(url: String, nodes: [(String, Int)], user: String?, password: String?) throws {
        let configuration = try RedisConfiguration(url: url)
        #expect(configuration.isCluster)
        #expect(configuration.seedNodes == nodes.map { RedisNodeAddress(host: $0.0, port: $0.1) })
        #expect(configuration.username == user && configuration.password == password && configuration.database == 0)
        #expect(throws: Never.self) { try RedisResponseStore(configuration: configuration) }
    }

    @Test("bad redis-cluster:// URLs and cluster settings are clear errors that never show the password", arguments: [
        ("redis-cluster://", "no host"),
        ("redis-cluster://a:1,,b:2", "no host"),
        ("redis-cluster://a:x", "the port 'x' is not a number"),
        ("redis-cluster://a:1/2", "a cluster has only database 0"),
        ("redis-cluster://a:1?x=1", "a query or fragment is not supported"),
        ("redis-cluster://u@a:1", "a user without a password"),
        ("redis-cluster://[::1:7000", "an IPv6 address without its ']'"),
        ("redis-cluster://u:hunter2@a:0", "redis-cluster://u:***@a:0"),
    ])
    func invalidClusterURLs(url: String, message: String) {
        RedisConfigurationTests.expectRefused(url, saying: message)
    }

    @Test("a cluster configuration is checked: database 0 only, seeds only in cluster mode, valid seeds")
    func validation() {
        var configuration = RedisConfiguration(database: 1, isCluster: true)
        #expect(throws: HTTPCachingError.invalidValue("the database 1 is not 0: a cluster has only database 0")) { try configuration.validate() }
        configuration = RedisConfiguration(clusterSeeds: [RedisNodeAddress(host: "b", port: 1)])
        #expect(throws: HTTPCachingError.invalidValue("clusterSeeds are set but isCluster is false")) { try configuration.validate() }
        configuration = RedisConfiguration(isCluster: true, clusterSeeds: [RedisNodeAddress(host: "b", port: 0)])
        #expect(throws: HTTPCachingError.self) { try configuration.validate() }
        #expect(RedisNodeAddress(host: "::1", port: 7).description == "[::1]:7")
    }

    @Test("the layout's hash tag is the base key: an entry, its variants and claims share a slot; other URLs do not")
    func layoutTags() {
        let layout = RedisEntryLayout(prefix: "p:")
        let key = E.entry("/page").key
        var variant = key
        variant.variant = "accept=text/html"
        let entryKey = String(decoding: layout.entryKey(key), as: UTF8.self)
        #expect(entryKey.hasPrefix("p:e\(RedisEntryLayout.format):{") && entryKey.hasSuffix("}")
                && entryKey.count == "p:e\(RedisEntryLayout.format):".count + 66)
        #expect(layout.entryKey(variant) != layout.entryKey(key))
        let keys = [layout.entryKey(key), layout.entryKey(variant), layout.claimKey(key), layout.claimKey(variant)]
        #expect(Set(keys.map(RedisClusterSlot.of)).count == 1)
        #expect(Set(keys).count == 4)
        let others = (0..<50).map { layout.entryKey(E.entry("/other/\($0)").key) }
        #expect(Set(others.map(RedisClusterSlot.of)).count > 40, "different URLs spread over the slots")
    }

    @Test("the demo takes --store redis-cluster://... and names its nodes, never the password")
    func demoStore() throws {
        let choice = try StoreChoice(parsing: "redis-cluster://cache:secret@h1:7000,h2:7001")
        #expect(choice == .redis(url: "redis-cluster://cache:secret@h1:7000,h2:7001"))
        #expect(choice.label == "redis-cluster h1:7000,h2:7001 (keys under cache-demo:)")
        #expect(throws: UsageError.self) { try StoreChoice(parsing: "redis-cluster://h1:7000/3") }
    }
}
