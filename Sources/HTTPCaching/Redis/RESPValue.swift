import Foundation

/// One RESP2 reply from a Redis server.
enum RESPValue: Sendable, Equatable {
    /// `+OK`: a short status line.
    case simpleString(String)
    /// `-ERR ...`: the server refused the command; the connection is still usable.
    case error(String)
    /// `:42`.
    case integer(Int64)
    /// `$3 abc`; nil for the null bulk string (`$-1`), a missing key.
    case bulkString([UInt8]?)
    /// `*2 ...`; nil for the null array (`*-1`).
    case array([RESPValue]?)

    /// The bytes of a bulk string or simple string; nil otherwise (a null, an error).
    var bytes: [UInt8]? {
        switch self {
        case .bulkString(let bytes): bytes
        case .simpleString(let text): Array(text.utf8)
        default: nil
        }
    }

    /// The server's message, for an error reply.
    var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }

    /// Whether this is the reply `+OK`.
    var isOK: Bool { self == .simpleString("OK") }
}

/// Something that can be one argument of a Redis command.
protocol RedisArgument {
    /// The argument's bytes, as sent in a bulk string.
    var redisBytes: [UInt8] { get }
}

extension String: RedisArgument {
    var redisBytes: [UInt8] { Array(utf8) }
}

extension Array: RedisArgument where Element == UInt8 {
    var redisBytes: [UInt8] { self }
}

extension Data: RedisArgument {
    var redisBytes: [UInt8] { [UInt8](self) }
}

extension Int: RedisArgument {
    var redisBytes: [UInt8] { Array(String(self).utf8) }
}

/// A command: its name and arguments, sent as a RESP array of bulk strings.
struct RedisCommand: Sendable, Equatable {
    /// The name first, then the arguments.
    var arguments: [[UInt8]]

    /// A command from its name and arguments.
    init(_ name: String, _ arguments: any RedisArgument...) {
        self.arguments = [Array(name.utf8)] + arguments.map(\.redisBytes)
    }

    /// A command from a name and a list of arguments built elsewhere.
    init(_ name: String, arguments: [[UInt8]]) {
        self.arguments = [Array(name.utf8)] + arguments
    }

    /// Appends the command in its wire form (`*N\r\n$len\r\narg\r\n...`).
    func encode(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "*"))
        out += String(arguments.count).utf8
        out += [13, 10]
        for argument in arguments {
            out.append(UInt8(ascii: "$"))
            out += String(argument.count).utf8
            out += [13, 10]
            out += argument
            out += [13, 10]
        }
    }

    /// The command's name, for error messages (never its arguments: they may be secrets).
    var name: String { String(decoding: arguments.first ?? [], as: UTF8.self) }
}
