import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A transform a store applies to bodies at rest: encoded as they are written, decoded as
/// they are read (compression, encryption). Give one to `DiskResponseStore` or
/// `RedisResponseStore`.
///
/// Its `name` is stored with each entry: an entry written with another transform, or with
/// none, is a miss, never decoded with the wrong one. A transform that throws makes the write
/// or the read fail (reported as `storeFailed`; the request goes on without the store), never
/// a wrong body. Bodies written by a transform are written whole, not as they arrive.
public protocol StoreTransform: Sendable {
    /// What the transform is, stored with each entry (at most 255 bytes of UTF-8): change it
    /// whenever what `decode` understands changes (a new key, a new algorithm).
    var name: String { get }

    /// The bytes to store for a body.
    /// - Throws: when it cannot encode; nothing is stored.
    func encode(_ body: Data) throws -> Data

    /// The body from stored bytes `encode` made.
    /// - Throws: when the bytes are not its own or are damaged; the read is a miss.
    func decode(_ stored: Data) throws -> Data
}

/// zlib compression (DEFLATE, RFC 1950), from the system's `libz.so.1`, loaded when first used:
/// the library libcurl, and so FoundationNetworking, already depends on, so no headers and no
/// package are needed. Where it cannot be loaded, `encode` and `decode` throw (the store then
/// works without storing or reading).
public struct DeflateTransform: StoreTransform {
    /// The compression level, 1 (fastest) to 9 (smallest). The default is 6.
    public let level: Int

    /// Stored with each entry.
    public var name: String { "deflate" }

    /// A transform compressing at `level`.
    /// - Parameter level: 1 (fastest) to 9 (smallest); other values are clamped. The default is 6.
    public init(level: Int = 6) {
        self.level = min(max(level, 1), 9)
    }

    /// Whether `libz.so.1` could be loaded on this system.
    public static var isAvailable: Bool { Zlib.functions != nil }

    /// The body's length (8 bytes, little-endian), then its zlib stream.
    /// - Throws: `HTTPCachingError` `.unavailable` when zlib cannot be loaded or fails.
    public func encode(_ body: Data) throws -> Data {
        guard let zlib = Zlib.functions else { throw Zlib.missing }
        var bound = zlib.bound(UInt(body.count))
        var out = Data(count: 8 + Int(bound))
        out.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(body.count).littleEndian, as: UInt64.self) }
        let status = out.withUnsafeMutableBytes { output in
            body.withUnsafeBytes { input in
                zlib.compress(output.baseAddress!.assumingMemoryBound(to: UInt8.self) + 8, &bound,
                              input.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(body.count), Int32(level))
            }
        }
        guard status == 0 else { throw HTTPCachingError.unavailable(reason: "zlib compress2 failed (\(status))") }
        out.count = 8 + Int(bound)
        return out
    }

    /// The body from its length and zlib stream.
    /// - Throws: `HTTPCachingError` `.unavailable` when the bytes do not decompress to the
    ///   length they announce (damaged, or not this transform's), or zlib cannot be loaded.
    public func decode(_ stored: Data) throws -> Data {
        guard let zlib = Zlib.functions else { throw Zlib.missing }
        guard stored.count >= 8 else { throw HTTPCachingError.unavailable(reason: "compressed body too short") }
        let announced = stored.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        // DEFLATE expands at most about 1032 times: a larger claim is damage, not a body.
        guard announced <= UInt64(stored.count) * 1032 + 64 else { throw HTTPCachingError.unavailable(reason: "compressed body length damaged") }
        var length = UInt(announced)
        var out = Data(count: Int(announced))
        let status = out.withUnsafeMutableBytes { output in
            stored.withUnsafeBytes { input in
                zlib.uncompress(output.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafeMutablePointer(bitPattern: 1), &length,
                                input.baseAddress!.assumingMemoryBound(to: UInt8.self) + 8, UInt(stored.count - 8))
            }
        }
        guard status == 0, length == UInt(announced) else {
            throw HTTPCachingError.unavailable(reason: "compressed body damaged (zlib \(status))")
        }
        return out
    }
}

/// The three zlib functions the transform needs, looked up once in `libz.so.1`.
enum Zlib {
    typealias Compress = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt>?, UnsafePointer<UInt8>?, UInt, Int32) -> Int32
    typealias Bound = @convention(c) (UInt) -> UInt
    typealias Uncompress = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt>?, UnsafePointer<UInt8>?, UInt) -> Int32

    struct Functions: @unchecked Sendable {
        let compress: Compress
        let bound: Bound
        let uncompress: Uncompress
    }

    static let missing = HTTPCachingError.unavailable(reason: "libz.so.1 could not be loaded")

    static let functions: Functions? = {
        guard let handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL),
              let compress = dlsym(handle, "compress2"), let bound = dlsym(handle, "compressBound"),
              let uncompress = dlsym(handle, "uncompress") else { return nil }
        return Functions(compress: unsafeBitCast(compress, to: Compress.self), bound: unsafeBitCast(bound, to: Bound.self),
                         uncompress: unsafeBitCast(uncompress, to: Uncompress.self))
    }()
}
