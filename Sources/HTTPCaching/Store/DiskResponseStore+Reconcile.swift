import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Bringing the disk store's index in step with its directory: the entry files the journal
// missed, the ones gone behind its back, and what crashed writers and older releases left.

extension DiskResponseStore {
    /// Lists the directory and brings the index in step: drops entries whose file is gone,
    /// adopts entry files the index missed (reading only their metadata), removes damaged
    /// ones, files of older formats and temporary files their writer left behind.
    func reconcile() {
        var present = Set<EntryName>()
        for fileName in files.names() {
            switch FileKind(fileName) {
            case .entry(let name): present.insert(name)
            case .olderEntry: files.unlink(fileName) // named by format 2 and earlier: no longer read
            case .temporary: removeIfAbandoned(fileName, in: files)
            case .other: if fileName == ".lock" { files.unlink(fileName) } // format 2's exclusive lock
            }
        }
        let known = state.withLock { Set($0.index.entries.keys) }
        var records: [JournalRecord] = []
        for name in known.subtracting(present) where files.status(name.fileName) == nil {
            records.append(.remove(name))
        }
        for name in present.subtracting(known) {
            if let entry = readMetadata(name) { records.append(.put(name, entry)) }
        }
        guard !records.isEmpty else { return }
        let changed = state.withLock { state in
            records.filter { record in
                switch record {
                case .put(let name, let entry):
                    guard state.index[name] == nil else { return false }
                    state.index.put(name, entry)
                case .remove(let name):
                    guard state.index.remove(name) != nil else { return false }
                default:
                    return false
                }
                return true
            }
        }
        append(changed)
    }

    /// The index entry of an entry file, from its metadata alone (the end of the file); nil if
    /// it is not one this store can use (a damaged or older file is removed).
    private func readMetadata(_ name: EntryName) -> IndexEntry? {
        guard let (fd, info) = files.openRegular(name.fileName, O_RDONLY) else { return nil }
        defer { closeDescriptor(fd) }
        guard info.st_size <= maxFileSize else { return nil }
        let size = Int(info.st_size)
        let result: Result<IndexEntry, EntryFileFormat.DecodeError> = {
            do throws(EntryFileFormat.DecodeError) {
                var tail = readTail(fd, size: size, count: min(size, 4096))
                let trailer = try Self.withBytes(tail) { raw throws(EntryFileFormat.DecodeError) in
                    try EntryFileFormat.readTrailer(raw, totalLength: size)
                }
                guard trailer.totalLength == size else { throw .truncated }
                let needed = trailer.metadataLength + EntryFileFormat.trailerSize
                if needed > tail.count { tail = readTail(fd, size: size, count: needed) }
                guard tail.count >= needed else { throw .truncated }
                let entry = try Self.withBytes(tail) { raw throws(EntryFileFormat.DecodeError) in
                    let metadata = UnsafeRawBufferPointer(rebasing: raw[(raw.count - needed)..<(raw.count - EntryFileFormat.trailerSize)])
                    return try EntryFileFormat.decodeMetadata(metadata, trailer: trailer, expecting: nil).entry
                }
                guard EntryName(entry.key) == name else { throw .malformed("the file is not named after its key") }
                var indexEntry = IndexEntry(entry)
                indexEntry.size = entry.byteCount + trailer.bodyLength
                return .success(indexEntry)
            } catch {
                return .failure(error)
            }
        }()
        switch result {
        case .success(let entry): return entry
        case .failure:
            files.unlink(name.fileName, ifStill: info)
            return nil
        }
    }

    /// `withUnsafeBytes` for a body that throws a typed error.
    private static func withBytes<T>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(EntryFileFormat.DecodeError) -> T)
        throws(EntryFileFormat.DecodeError) -> T {
        let result: Result<T, EntryFileFormat.DecodeError> = bytes.withUnsafeBytes { raw in
            do throws(EntryFileFormat.DecodeError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private func readTail(_ fd: Int32, size: Int, count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { buffer in
            readAll(count) { done in pread(fd, buffer.baseAddress! + done, count - done, off_t(size - count + done)) }
        }
        bytes.removeLast(count - read)
        return bytes
    }
}

/// Removes a temporary file whose writer is gone (its name holds the writer's process id) or
/// that is more than an hour old.
func removeIfAbandoned(_ fileName: String, in folder: StoreDirectory) {
    let parts = fileName.split(separator: ".", omittingEmptySubsequences: false)
    if parts.count >= 3, let pid = Journal.decimal(parts[parts.count - 3].utf8, max: Int(Int32.max)),
       processIsGone(Int32(pid)) {
        folder.unlink(fileName)
        return
    }
    if let info = folder.status(fileName), time(nil) - info.st_mtim.tv_sec > 3600 {
        folder.unlink(fileName)
    }
}

/// What a name in the store's folder is, judged from its bytes.
enum FileKind: Equatable {
    /// `<32 hex>.entry`
    case entry(EntryName)
    /// `<64 hex>.entry`, as format 2 and earlier named entries
    case olderEntry
    /// `*.tmp`
    case temporary
    case other

    init(_ fileName: String) {
        var fileName = fileName
        self = fileName.withUTF8 { bytes in
            let suffix = Array(".entry".utf8)
            if bytes.count > 6, bytes[(bytes.count - 6)...].elementsEqual(suffix) {
                let stem = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[0..<(bytes.count - 6)])
                if let name = EntryName(hex: stem) { return .entry(name) }
                if stem.count == 64, stem.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) { return .olderEntry }
                return .other
            }
            if bytes.count > 4, bytes[(bytes.count - 4)...].elementsEqual(".tmp".utf8) { return .temporary }
            return .other
        }
    }
}
