import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import HTTPCaching
import HTTPCachingTestKit
@testable import store_stress_worker

/// A run of `store-stress-worker`, its output read line by line as it comes.
final class Worker: @unchecked Sendable {
    let process: ChildProcess
    /// Lines read and not yet taken, and whether the output has ended.
    private let output = Mutex<(lines: [String], ended: Bool)>(([], false))
    private let arrived = DispatchSemaphore(value: 0)

    init(_ arguments: [String]) throws {
        process = try ChildProcess(builtExecutable(named: "store-stress-worker").path, arguments,
                                   input: .pipe, output: .pipe, errors: .inherit)
        let handle = process.output!
        DispatchQueue.global().async { [self] in
            var pending = Data()
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += data
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    self.output.withLock { $0.lines.append(line) }
                    arrived.signal()
                }
            }
            self.output.withLock { $0.ended = true }
            arrived.signal() // the end: wakes a reader waiting for more
        }
    }

    /// The next line, waiting at most `timeout` seconds; nil at the end of the output or on a
    /// timeout.
    func nextLine(timeout: TimeInterval = 30) -> String? {
        let deadline = DispatchTime.now() + timeout
        while true {
            let (line, ended) = output.withLock { output in
                (output.lines.isEmpty ? nil : output.lines.removeFirst(), output.ended)
            }
            if let line { return line }
            if ended { return nil }
            guard arrived.wait(timeout: deadline) == .success else { return nil }
        }
    }

    /// Reads lines until one satisfies `predicate`; false at the end or on a timeout.
    func waitFor(timeout: TimeInterval = 30, _ predicate: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while let line = nextLine(timeout: max(0, deadline.timeIntervalSinceNow)) {
            if predicate(line) { return true }
        }
        return false
    }

    func send(_ line: String) {
        process.input!.write(Data((line + "\n").utf8))
    }

    func closeInput() {
        try? process.input!.close()
    }

    func kill() {
        process.send(SIGKILL)
    }

    /// Waits for the process to end; false on a timeout (it is then killed).
    @discardableResult
    func waitForExit(timeout: TimeInterval = 30) -> Bool {
        if process.waitForExit(timeout: timeout) { return true }
        process.end(with: SIGKILL)
        return false
    }
}

@Suite("Disk store shared by processes")
struct DiskResponseStoreSharingTests {
    typealias E = StoreConformance

    /// One worker process's part: the seed of its operations, and the progress line at which
    /// it is killed (nil: never) and started again for the rest.
    struct WorkerPlan {
        var seed: UInt64
        var killAt: Int?
    }

    /// The most entry files seen in a directory, counted at each progress line of any worker.
    final class FileCountSampler: Sendable {
        let path: String
        private let counted = Mutex(0)

        init(_ path: String) { self.path = path }

        func sample() {
            let count = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".entry") }.count
            counted.withLock { $0 = max($0, count) }
        }

        var most: Int { counted.withLock { $0 } }
    }

    @Test("four processes × 2,000 mixed operations with SIGKILLs: every entry read is whole and correct, limits hold")
    func manyProcesses() throws {
        let directory = TemporaryDirectory()
        var random = SeededGenerator(seed: UInt64.random(in: 0...UInt64.max))
        let seed = random.next()
        // Three of the four are killed once, at a random point, and started again for the rest.
        let plans = (0..<4).map { worker in
            WorkerPlan(seed: seed &+ UInt64(worker) * 7919, killAt: worker < 3 ? Int(random.next() % 15 + 3) * 100 : nil)
        }
        let failures = Mutex<[String]>([])
        let sampler = FileCountSampler(directory.path)
        DispatchQueue.concurrentPerform(iterations: plans.count) { worker in
            guard let failure = Self.run(worker: worker, plans[worker], sampler: sampler) else { return }
            failures.withLock { $0.append(failure) }
        }
        #expect(failures.withLock { $0 }.isEmpty, "seed \(seed): \(failures.withLock { $0 })")
        // While they ran: each process may be one write past the ceiling it sees.
        let ceiling = Stress.countLimit + Stress.countLimit / 10 + plans.count
        #expect(sampler.most <= ceiling, "at most \(sampler.most) entry files while running, seed \(seed)")
        try Self.expectWholeEntriesWithinLimits(directory, seed: seed)
    }

    /// Runs one worker's 2,000 operations on the sampler's directory: when its plan says so,
    /// killed at that point and started again for the rest.
    /// - Returns: what went wrong, or nil.
    static func run(worker: Int, _ plan: WorkerPlan, sampler: FileCountSampler) -> String? {
        var remaining = 2000
        var seed = plan.seed
        var killAt = plan.killAt
        while remaining > 0 {
            // A run to be killed runs until it is: the kill lands mid-operation, never after the end.
            guard let child = try? Worker(["stress", sampler.path, String(seed), killAt == nil ? String(remaining) : "0"]) else {
                return "worker \(worker) did not start"
            }
            guard let point = killAt else {
                let done = child.waitFor(timeout: 60) { line in
                    sampler.sample()
                    return line == "done"
                }
                child.waitForExit()
                guard done && child.process.exitStatus == 0 else {
                    return "worker \(worker) (seed \(seed)) failed: status \(String(describing: child.process.exitStatus)) (3: it read a wrong entry)"
                }
                return nil
            }
            let reached = child.waitFor { line in
                sampler.sample()
                return line == "progress \(point)"
            }
            child.kill()
            child.waitForExit()
            guard reached && child.process.terminatingSignal == SIGKILL else {
                return "worker \(worker) ended before its kill at \(point): status \(String(describing: child.process.exitStatus))"
            }
            remaining -= point
            seed &+= 1_000_003
            killAt = nil
        }
        return nil
    }

    /// After the workers: every readable entry is whole and correct, the totals are within the
    /// limits, and no killed writer's temporary file is left.
    static func expectWholeEntriesWithinLimits(_ directory: TemporaryDirectory, seed: UInt64) throws {
        let store = try DiskResponseStore(directory: directory.url, byteLimit: Stress.byteLimit, countLimit: Stress.countLimit)
        defer { store.close() }
        // Listed before reading: the store may trim in the background while the reads run.
        let filesBefore = directory.entryFiles().count
        var found = 0
        for index in 0..<Stress.keys {
            let path = "/k/\(index)"
            guard let entry = try store.entry(for: StressBody.key(path)) else { continue }
            #expect(StressBody.isWhole(entry, path: path), "seed \(seed): \(path)")
            found += 1
        }
        #expect(store.entryCount <= Stress.countLimit + Stress.countLimit / 10, "seed \(seed)")
        #expect(store.totalBytes <= Stress.byteLimit + Stress.byteLimit / 10, "seed \(seed)")
        let files = directory.entryFiles()
        #expect(files.count <= Stress.countLimit + Stress.countLimit / 10, "entry files on disk, seed \(seed)")
        #expect(found <= filesBefore, "no entry is read without its file")
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty, "temporary files of killed writers are removed on open: \(leftovers)")
    }

    @Test("a refresh claim is exclusive across processes until released; a crashed holder's claim lasts its lease")
    func claimsAcrossProcesses() throws {
        let directory = TemporaryDirectory()
        let local = try DiskResponseStore(directory: directory.url)
        defer { local.close() }
        let key = StressBody.key("/claimed")

        let holder = try Worker(["claim", directory.path, "/claimed", "30"])
        #expect(holder.nextLine() == "granted")
        #expect(!local.claimRefresh(of: key, lease: 30), "held by another process")
        let rival = try Worker(["claim", directory.path, "/claimed", "30"])
        #expect(rival.nextLine() == "refused")
        rival.closeInput()
        rival.waitForExit()
        holder.send("release")
        #expect(holder.nextLine() == "released")
        #expect(local.claimRefresh(of: key, lease: 30), "free once released")
        let late = try Worker(["claim", directory.path, "/claimed", "30"])
        #expect(late.nextLine() == "refused", "held by this process now")
        late.closeInput()
        late.waitForExit()
        local.releaseRefresh(of: key)
        holder.closeInput()
        holder.waitForExit()

        // A holder killed while it holds the claim: the claim stays until its lease ends.
        let crashed = try Worker(["claim", directory.path, "/crashed", "30"])
        #expect(crashed.nextLine() == "granted")
        crashed.kill()
        crashed.waitForExit()
        #expect(!local.claimRefresh(of: StressBody.key("/crashed"), lease: 30))
    }

    @Test("a claim whose lease ran out is taken over, and its old holder's release leaves the new claim alone")
    func expiredClaim() throws {
        let directory = TemporaryDirectory()
        let first = try DiskResponseStore(directory: directory.url)
        let second = try DiskResponseStore(directory: directory.url)
        defer { first.close(); second.close() }
        let key = E.entry("/c").key
        #expect(first.claimRefresh(of: key, lease: 30))
        // Its lease ran out (written by hand: no test waits for a lease).
        let path = directory.path + "/claims/" + DiskResponseStore.fileName(for: key)
        let token = try String(contentsOfFile: path, encoding: .utf8).split(separator: " ")[1]
        try overwrite(path, with: Data("\(DiskResponseStore.wallClockMilliseconds() - 1) \(token)".utf8))
        #expect(second.claimRefresh(of: key, lease: 30), "an expired claim is taken over")
        first.releaseRefresh(of: key)
        #expect(!first.claimRefresh(of: key, lease: 30), "the old holder's release did not free the new claim")
        second.releaseRefresh(of: key)
        #expect(first.claimRefresh(of: key, lease: 30))
    }

    @Test("processes opening a new directory at once all get the same partition secret, kept across reopening")
    func secretRace() throws {
        let directory = TemporaryDirectory()
        let location = directory.url.appendingPathComponent("new")
        let workers = try (0..<6).map { _ in try Worker(["secret", location.path]) }
        for worker in workers { worker.send("go") }
        let secrets = workers.map { $0.nextLine() }
        workers.forEach { $0.waitForExit() }
        #expect(Set(secrets).count == 1, "\(secrets)")
        #expect(secrets.first??.count == 64)
        let store = try DiskResponseStore(directory: location)
        #expect(store.partitionSecret().map { String(format: "%02x", $0) }.joined() == secrets.first)
        store.close()
        #expect(permissions(location.path + "/secret") == 0o600)
        #expect(try DiskResponseStore(directory: location).partitionSecret() == store.partitionSecret())
    }

    @Test("a store follows the journal another store compacted (a new file) and the writes after it")
    func followsCompaction() throws {
        let directory = TemporaryDirectory()
        let a = try DiskResponseStore(directory: directory.url)
        let b = try DiskResponseStore(directory: directory.url)
        defer { a.close(); b.close() }
        for i in 0..<10 { try a.write(E.entry("/\(i)", body: "body \(i)")) }
        #expect(b.entryCount == 10)
        var before = stat()
        stat(directory.path + "/index.log", &before)
        for round in 0..<50 { for i in 0..<10 { _ = try a.entry(for: E.entry("/\((i + round) % 10)").key) } }
        #expect(a.compactJournal())
        var after = stat()
        stat(directory.path + "/index.log", &after)
        #expect(after.st_ino != before.st_ino, "compacted into a new file")
        let lines = try String(contentsOfFile: directory.path + "/index.log", encoding: .utf8).split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("P ") }.count == 10, "one line per entry after compaction")
        #expect(lines.count <= 20, "\(lines.count) lines: the entries, and at most the uses recorded since")
        try a.write(E.entry("/after"))
        #expect(b.entryCount == 11)
        #expect(try b.entry(for: E.entry("/after").key) != nil)
        #expect(try b.entry(for: E.entry("/3").key)?.body == Data("body 3".utf8))
        try b.removeEntry(for: E.entry("/3").key)
        #expect(a.entryCount == 10)
    }

    @Test("an entry file the journal does not know (a writer killed between rename and append) is adopted on open")
    func adoptsUnknownFiles() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url)
        let entry = E.entry("/orphan", body: "kept", usefulUntil: E.base.addingTimeInterval(60), statusCode: 203)
        try store.write(entry)
        store.close()
        try overwrite(directory.path + "/index.log", with: Data()) // the journal lost its line
        let reopened = try DiskResponseStore(directory: directory.url)
        defer { reopened.close() }
        #expect(reopened.entryCount == 1)
        #expect(reopened.entryInfos() == [StoredEntryInfo(entry)], "metadata read from the file's end")
        #expect(try reopened.entry(for: entry.key) == entry)
    }

    @Test("the eviction handler hears of background evictions; waitForMaintenance needs no sleep")
    func evictionHandler() throws {
        let directory = TemporaryDirectory()
        let store = try DiskResponseStore(directory: directory.url, countLimit: 100, trimRatio: 0.5)
        defer { store.close() }
        let evictions = Evictions(store)
        var reported: [CacheKey] = []
        for i in 0..<101 { reported += try store.write(E.entry("/\(i)")).evicted }
        #expect(store.waitForMaintenance())
        let all = reported + evictions.keys
        #expect(all.count == 51, "down to half of 100")
        #expect(Set(all).count == all.count, "each eviction reported once")
        #expect(all.first == E.entry("/0").key, "least recently used first")
        #expect(store.entryCount == 50)
    }
}
