import Foundation
import Testing
@testable import HTTPCaching
@testable import cache_demo

/// `redis-sentinel://` URLs and the Sentinel fields of `RedisConfiguration`, without a server.
@Suite("Redis Sentinel configuration")
struct RedisSentinelConfigurationTests {
    @Test("redis-sentinel:// URLs give the sentinels, the master name, the data nodes' user and password, and the database", arguments: [
        ("redis-sentinel://127.0.0.1:26379#mymaster", "127.0.0.1:26379", [], "mymaster", nil, nil, 0),
        ("redis-sentinel://s1#m", "s1:26379", [], "m", nil, nil, 0),
        ("redis-sentinel://S1,s2:26380,[::1]:26381/2#my%20master", "s1:26379", ["s2:26380", "[::1]:26381"], "my master", nil, nil, 2),
        ("redis-sentinel://cache:p%40ss%23@s1:5000,s2:5001/0#m", "s1:5000", ["s2:5001"], "m", "cache", "p@ss#", 0),
        ("redis-sentinel://:pw@s1/#m", "s1:26379", [], "m", nil, "pw", 0),
        ("REDIS-SENTINEL://s1:1#name-with.dots", "s1:1", [], "name-with.dots", nil, nil, 0),
    ] as [(String, String, [String], String, String?, String?, Int)])
    func validURLs(url: String, first: String, more: [String], name: String, user: String?, password: String?, database: Int) throws {
        let configuration = try RedisConfiguration(url: url, keyPrefix: "p:")
        #expect(RedisNodeAddress(host: configuration.host, port: configuration.port).description == first)
        #expect(configuration.additionalSentinels.map(\.description) == more)
        #expect(configuration.sentinelMasterName == name && configuration.isSentinel && !configuration.isCluster)
        #expect(configuration.username == user && configuration.password == password)
        #expect(configuration.sentinelUsername == nil && configuration.sentinelPassword == nil, "a URL never gives the sentinels' credentials")
        #expect(configuration.database == database && configuration.keyPrefix == "p:")
        #expect(configuration.sentinelNodes.count == 1 + more.count)
        #expect(throws: Never.self) { try configuration.validate() }
    }

    @Test("bad redis-sentinel:// URLs are clear errors that never show the password", arguments: [
        ("redis-sentinel://s1:26379", "no master name"),
        ("redis-sentinel://s1:26379/1", "no master name"),
        ("redis-sentinel://s1#", "the master name after '#' is empty"),
        ("redis-sentinel://s1/x#m", "the database 'x' is not a number"),
        ("redis-sentinel://s1/-2#m", "the database '-2' is not a number"),
        ("redis-sentinel://s1?timeout=1#m", "a query is not supported"),
        ("redis-sentinel://alice@s1#m", "a user without a password (write redis-sentinel://"),
        ("redis-sentinel://s1:99999#m", "between 1 and 65535"),
        ("redis-sentinel://s1,,s2#m", "no host in ''"),
        ("redis-sentinel://#m", "no host in ''"),
        ("redis-sentinel://[::1#m", "an IPv6 address without its ']'"),
        ("redis-sentinel://alice:hunter2@s1:x#m", "redis-sentinel://alice:***@s1:x#m"),
        ("redis-sentinels://s1#m", "not a redis://, rediss://, redis-cluster://, rediss-cluster:// or redis-sentinel:// URL"),
    ])
    func invalidURLs(url: String, message: String) {
        RedisConfigurationTests.expectRefused(url, saying: message)
    }

    @Test("validation names the Sentinel field out of range")
    func validation() {
        func failure(_ change: (inout RedisConfiguration) -> Void) -> String {
            var configuration = RedisConfiguration()
            configuration.sentinelMasterName = "m"
            change(&configuration)
            do { try configuration.validate() } catch { return error.description }
            return "valid"
        }
        #expect(failure { _ in } == "valid")
        #expect(failure { $0.sentinelMasterName = "" }.contains("the sentinel master name is empty"))
        #expect(failure { $0.isCluster = true }.contains("isCluster and sentinelMasterName are both set"))
        #expect(failure { $0.tls = RedisTLSOptions() }.contains("TLS with Redis Sentinel is not supported"))
        #expect(failure { $0.sentinelUsername = "u" }.contains("a sentinelUsername without a sentinelPassword"))
        #expect(failure { $0.additionalSentinels = [RedisNodeAddress(host: "", port: 1)] }.contains("a sentinel's host is empty"))
        #expect(failure { $0.additionalSentinels = [RedisNodeAddress(host: "h", port: 0)] }.contains("the sentinel port 0"))
        #expect(failure {
            $0.sentinelMasterName = nil
            $0.additionalSentinels = [RedisNodeAddress(host: "h", port: 1)]
        }.contains("additionalSentinels are set but sentinelMasterName is nil"))
    }

    @Test("the sentinels get the sentinel credentials and database 0; the primary the data nodes' credentials and database")
    func perNodeConfigurations() throws {
        var configuration = try RedisConfiguration(url: "redis-sentinel://cache:data-pw@s1:1,s2:2/3#m", keyPrefix: "p:")
        configuration.sentinelUsername = "watcher"
        configuration.sentinelPassword = "sentinel-pw"
        configuration.commandTimeout = 0.25
        configuration.poolSize = 16
        let sentinel = configuration.forSentinel(RedisNodeAddress(host: "s2", port: 2))
        #expect(sentinel.host == "s2" && sentinel.port == 2 && sentinel.database == 0)
        #expect(sentinel.username == "watcher" && sentinel.password == "sentinel-pw")
        #expect(sentinel.commandTimeout == 0.25 && !sentinel.isSentinel)
        let primary = configuration.forPrimary(RedisNodeAddress(host: "10.0.0.9", port: 6380))
        #expect(primary.host == "10.0.0.9" && primary.port == 6380 && primary.database == 3)
        #expect(primary.username == "cache" && primary.password == "data-pw" && primary.poolSize == 16)
        #expect(!primary.isSentinel && primary.sentinelPassword == nil && primary.additionalSentinels.isEmpty)
        #expect(throws: Never.self) { try primary.validate() }
        let store = try RedisResponseStore(configuration: configuration)
        guard case .sentinel(let router) = store.backend else {
            Issue.record("not a sentinel backend")
            return
        }
        #expect(router.primaryAddress == nil, "nothing is asked before the first call")
        #expect(router.sentinelOrder.map(\.description) == ["s1:1", "s2:2"])
    }

    @Test("the demo takes --store redis-sentinel://...#name, and labels it without credentials")
    func demoStoreOption() throws {
        let url = "redis-sentinel://cache:pw@10.0.0.1:26379,10.0.0.2/1#mymaster"
        #expect(try DemoCommand.parse(["--store", url]) == .walkthrough(.redis(url: url)))
        #expect(StoreChoice.redis(url: url).label == "redis-sentinel mymaster via 10.0.0.1:26379,10.0.0.2:26379 db 1 (keys under cache-demo:)")
        do {
            _ = try DemoCommand.parse(["--store", "redis-sentinel://h:1"])
            Issue.record("parsed a sentinel URL without a master name")
        } catch {
            #expect(error.description.contains("redis-sentinel://") && error.description.contains("no master name"), "\(error.description)")
        }
        #expect(DemoCommand.usage.contains("redis-sentinel://"))
    }
}
