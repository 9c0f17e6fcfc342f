import Foundation

extension RedisConnection {
    /// Checks that the server is a primary: `ROLE` answers `master`. A user whose ACL refuses
    /// `ROLE` (it is in `@dangerous`) is asked `HELLO` instead, whose `role` field says the same
    /// (Redis 6 and later). Closes the connection when the check fails.
    /// - Throws: `RedisClientError` of kind `.replica` when the server says it is not a
    ///   primary, `.handshake` when it tells no role, or what the call throws.
    func requirePrimary(_ configuration: RedisConfiguration) throws(RedisClientError) {
        let node = "\(configuration.host):\(configuration.port)"
        do throws(RedisClientError) {
            var role = Self.role(in: try execute([RedisCommand("ROLE")], timeout: configuration.commandTimeout)[0])
            var refusal = ""
            if role == nil {
                let hello = try execute([RedisCommand("HELLO")], timeout: configuration.commandTimeout)[0]
                role = Self.helloRole(in: hello)
                refusal = hello.errorMessage ?? ""
            }
            guard let role else {
                throw RedisClientError(.handshake, "Redis at \(node) told no role (the user needs +role or HELLO): \(refusal)")
            }
            guard role == "master" else {
                throw RedisClientError(.replica, "Redis at \(node), named the primary, says it is a \(role): not used")
            }
        } catch {
            close()
            throw error
        }
    }

    /// The first element of a `ROLE` reply (`master`, `slave`, `sentinel`), nil for an error.
    private static func role(in reply: RESPValue) -> String? {
        guard case .array(let parts?) = reply, let first = parts.first?.bytes else { return nil }
        return String(decoding: first, as: UTF8.self)
    }

    /// The `role` field of a RESP2 `HELLO` reply (alternating names and values).
    private static func helloRole(in reply: RESPValue) -> String? {
        guard case .array(let parts?) = reply else { return nil }
        var index = 0
        while index + 1 < parts.count {
            if parts[index].bytes == Array("role".utf8), let value = parts[index + 1].bytes {
                return String(decoding: value, as: UTF8.self)
            }
            index += 2
        }
        return nil
    }
}
