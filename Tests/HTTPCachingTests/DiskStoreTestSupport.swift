import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
@testable import HTTPCaching

/// A fresh directory under the system's temporary folder, removed when dropped.
final class TemporaryDirectory {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("http-caching-tests-\(UUID().uuidString)", isDirectory: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    var path: String { url.path }

    func entryFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".entry") }.sorted()
    }
}

/// Replaces a file's bytes in place. (Foundation's Data.write(to:) goes through a folder in
/// /tmp on Linux that it leaves behind.)
func overwrite(_ path: String, with data: Data) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == data.count else { throw POSIXError(.EIO) }
}

func permissions(_ path: String) -> mode_t {
    var info = stat()
    stat(path, &info)
    return info.st_mode & 0o777
}

/// Collects the keys a disk store evicts in the background.
final class Evictions: Sendable {
    private let collected = Mutex<[CacheKey]>([])

    init(_ store: DiskResponseStore) {
        store.evictionHandler = { keys in self.collected.withLock { $0 += keys } }
    }

    var keys: [CacheKey] { collected.withLock { $0 } }
}
