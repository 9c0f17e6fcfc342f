import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, for every program the tests run.
///
/// Foundation's `Process` is not used: in swift-corelibs-foundation 6.3.1 `run()` finds the
/// highest open descriptor by copying each `/proc/self/fd` entry's whole 256-byte `d_name`
/// from records shorter than that, and crashed the suite (SIGSEGV in `memcpy`) when the test
/// process held about 1,500 descriptors, as it does with every test running at once; and it
/// passes the test runner's blocked signals on, so a child never sees SIGTERM. Here the child
/// has no signal blocked or ignored, inherits no descriptor but its three standard ones, and is
/// reaped by a thread of its own.
final class ChildProcess: @unchecked Sendable {
    /// Where a standard stream of the child goes.
    enum Stream {
        /// /dev/null.
        case null
        /// The test process's own.
        case inherit
        /// A pipe whose other end the test holds (`input`, `output`, `errors`).
        case pipe
    }

    let pid: pid_t
    /// The write end of the child's standard input, for `.pipe`.
    let input: FileHandle?
    /// The read end of the child's standard output, for `.pipe`.
    let output: FileHandle?
    /// The read end of the child's standard error, for `.pipe`.
    let errors: FileHandle?
    private let exited = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var ended = false
    /// The status `waitpid` gave, set by the reaping thread (which holds this, not the process
    /// object, so dropping the object still kills a running child).
    private let reaped = Reaped()

    private final class Reaped: @unchecked Sendable {
        let lock = NSLock()
        var status: Int32 = 0
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts `path` with `arguments`, in this process's environment with `environment`'s
    /// variables set over it.
    /// - Throws: `Failure` when it cannot be started.
    init(_ path: String, _ arguments: [String], input: Stream = .null, output: Stream = .null, errors: Stream = .null,
         environment: [String: String] = [:]) throws {
        let actions = try SpawnActions()
        self.input = try actions.connect(input, to: 0, childReads: true)
        self.output = try actions.connect(output, to: 1, childReads: false)
        self.errors = try actions.connect(errors, to: 2, childReads: false)
        actions.closeInheritedDescriptors()
        pid = try actions.spawn(path, arguments, environment: environment)
        let spawned = pid, exited = self.exited, reaped = self.reaped
        Thread.detachNewThread {
            var status: Int32 = 0
            while waitpid(spawned, &status, 0) == -1 && errno == EINTR {}
            reaped.lock.withLock { reaped.status = status }
            exited.signal()
        }
    }

    /// The file actions of one spawn: where the child's standard streams go, and that it
    /// inherits no other descriptor. The child's ends of its pipes are closed here once it has
    /// started (or failed to).
    private final class SpawnActions {
        let actions = UnsafeMutablePointer<posix_spawn_file_actions_t>.allocate(capacity: 1)
        private var childEnds: [Int32] = []

        init() throws {
            guard posix_spawn_file_actions_init(actions) == 0 else {
                actions.deallocate()
                throw Failure(description: "posix_spawn_file_actions_init failed")
            }
        }

        deinit {
            for end in childEnds { close(end) }
            posix_spawn_file_actions_destroy(actions)
            actions.deallocate()
        }

        /// Connects the child's descriptor `target` as `stream` says.
        /// - Returns: the test's end of a pipe, or nil.
        /// - Throws: `Failure` if a pipe cannot be made.
        func connect(_ stream: Stream, to target: Int32, childReads: Bool) throws -> FileHandle? {
            switch stream {
            case .inherit:
                return nil
            case .null:
                posix_spawn_file_actions_addopen(actions, target, "/dev/null", childReads ? O_RDONLY : O_WRONLY, 0)
                return nil
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard ChildProcess.pipe2(&ends, O_CLOEXEC) == 0 else { throw Failure(description: "pipe: \(String(cString: strerror(errno)))") }
                let (child, test) = childReads ? (ends[0], ends[1]) : (ends[1], ends[0])
                posix_spawn_file_actions_adddup2(actions, child, target)
                childEnds.append(child)
                return FileHandle(fileDescriptor: test, closeOnDealloc: true)
            }
        }

        /// The child closes every descriptor from 3 on.
        func closeInheritedDescriptors() {
            if let closeFrom = ChildProcess.addCloseFrom {
                _ = closeFrom(actions, 3)
                return
            }
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            for fd in open.compactMap(Int32.init) where fd > 2 && !childEnds.contains(fd) {
                posix_spawn_file_actions_addclose(actions, fd)
            }
        }

        /// Starts the child with no signal blocked or ignored (the test runner's blocked
        /// signals are not passed on).
        /// - Throws: `Failure` if it cannot be started.
        func spawn(_ path: String, _ arguments: [String], environment: [String: String]) throws -> pid_t {
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t(), defaults = sigset_t()
            sigemptyset(&none)
            sigemptyset(&defaults)
            for signal in Int32(1)..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigmask(&attributes, &none)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            let variables = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
            let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in envp { free(pointer) } }
            var child = pid_t()
            let status = posix_spawn(&child, path, actions, &attributes, argv, envp)
            guard status == 0 else { throw Failure(description: "cannot start \(path): \(String(cString: strerror(status)))") }
            return child
        }
    }

    deinit { end(with: SIGKILL) }

    // glibc's, declared only under _GNU_SOURCE, which the Glibc module does not define.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let pipe2: Pipe2 = unsafeBitCast(dlsym(nil, "pipe2")!, to: Pipe2.self)
    /// glibc 2.34 and later: the child closes every descriptor from 3 on.
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Whether the process has ended.
    var hasExited: Bool { waitForExit(timeout: 0) }

    /// Waits up to `timeout` seconds for the process to end; true if it has.
    func waitForExit(timeout: TimeInterval) -> Bool {
        if lock.withLock({ ended }) { return true }
        guard exited.wait(timeout: .now() + timeout) == .success else { return lock.withLock { ended } }
        lock.withLock { ended = true }
        exited.signal() // for any other waiter
        return true
    }

    /// Waits for the process to end, off the caller's thread.
    func exit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                _ = self.waitForExit(timeout: .infinity)
                continuation.resume()
            }
        }
    }

    /// The exit status, once the process has exited by itself; nil before, or if a signal ended it.
    var exitStatus: Int32? {
        guard hasExited else { return nil }
        let status = reaped.lock.withLock { reaped.status }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : nil
    }

    /// The signal that ended the process, if one did.
    var terminatingSignal: Int32? {
        guard hasExited else { return nil }
        let status = reaped.lock.withLock { reaped.status }
        let signal = status & 0x7f
        return signal != 0 && signal != 0x7f ? signal : nil
    }

    /// Sends a signal, unless the process has ended (its pid may be another's by now).
    func send(_ signal: Int32) {
        if !hasExited { Glibc.kill(pid, signal) }
    }

    /// Sends a signal and waits for the process to end; SIGKILL if it has not after 10 s.
    func end(with signal: Int32) {
        guard !hasExited else { return }
        Glibc.kill(pid, SIGCONT) // a paused process cannot act on SIGTERM
        Glibc.kill(pid, signal)
        if !waitForExit(timeout: 10) {
            Glibc.kill(pid, SIGKILL)
            _ = waitForExit(timeout: 10)
        }
    }
}
