import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An OpenSSL client context made from `RedisTLSOptions`: the trusted certificates, the client
/// certificate, whether the server's certificate is verified. One per store, shared by its
/// connections (OpenSSL 3 allows `SSL_new` on one configured context from any thread); freed
/// with the store.
final class RedisTLSContext: @unchecked Sendable {
    let functions: OpenSSL.Functions
    let context: OpenSSL.Handle
    let options: RedisTLSOptions

    /// Loads OpenSSL if it is not yet, and makes the context.
    /// - Throws: `HTTPCachingError` `.unavailable` when OpenSSL 3 cannot be loaded (naming the
    ///   package to install), `.invalidValue` when a certificate or key file cannot be read.
    init(_ options: RedisTLSOptions) throws(HTTPCachingError) {
        let functions = try OpenSSL.loaded.get()
        functions.errorClear()
        guard let method = functions.clientMethod(), let context = functions.contextNew(method) else {
            throw .unavailable(reason: "OpenSSL could not make a TLS context: \(functions.queuedErrors())")
        }
        self.functions = functions
        self.context = context
        self.options = options
        try configure()
    }

    deinit { functions.contextFree(context) }

    private func configure() throws(HTTPCachingError) {
        func check(_ status: Int32, _ what: String) throws(HTTPCachingError) {
            if status != 1 { throw .invalidValue("\(what): \(functions.queuedErrors())") }
        }
        _ = functions.contextControl(context, OpenSSL.controlSetMinimumVersion, OpenSSL.version12, nil)
        if options.allowsUntrustedCertificates {
            functions.contextSetVerify(context, OpenSSL.verifyNone, nil)
        } else {
            if let file = options.caFile {
                try check(functions.contextLoadVerifyLocations(context, file, nil), "the CA file '\(file)' could not be loaded")
            } else {
                try check(functions.contextSetDefaultVerifyPaths(context), "the system's CA certificates could not be found")
            }
            functions.contextSetVerify(context, OpenSSL.verifyPeer, nil)
        }
        if let certificate = options.certificateFile {
            let key = options.keyFile ?? certificate
            try check(functions.contextUseCertificateChainFile(context, certificate),
                      "the client certificate file '\(certificate)' could not be loaded")
            try check(functions.contextUsePrivateKeyFile(context, key, OpenSSL.fileTypePEM),
                      "the client key file '\(key)' could not be loaded")
            try check(functions.contextCheckPrivateKey(context), "the client key '\(key)' does not match the certificate '\(certificate)'")
        }
    }
}

/// TLS on one connected, non-blocking socket, for one `RedisConnection`.
///
/// OpenSSL never touches the socket: it reads from and writes to two memory buffers, and this
/// type moves bytes between them and the socket itself, with `poll` against the call's
/// deadline and `MSG_NOSIGNAL`, exactly as the plain connection does. So the connect and
/// command timeouts hold over TLS, and a server that closes the connection never raises
/// `SIGPIPE`. Not thread-safe: used by one caller at a time, as its connection is.
final class RedisTLSSession {
    private let functions: OpenSSL.Functions
    private let ssl: OpenSSL.Handle
    /// Bytes from the server, for OpenSSL to decrypt (owned by `ssl`).
    private let incoming: OpenSSL.Handle
    /// Bytes OpenSSL encrypted, to send to the server (owned by `ssl`).
    private let outgoing: OpenSSL.Handle
    private let fd: Int32
    /// Whether a call failed: OpenSSL must not be asked for an orderly shutdown after that.
    private var isFailed = false
    private var buffer = [UInt8](repeating: 0, count: 32 << 10)

    /// Makes the session and runs the handshake, verifying the server's certificate for
    /// `host` (a name, or an address) unless the context allows any.
    /// - Throws: `RedisClientError` of kind `.connect` when the handshake fails (a certificate
    ///   not trusted or for another name, a server that does not speak TLS), `.timeout` when it
    ///   does not finish by the deadline.
    init(context: RedisTLSContext, fd: Int32, host: String, port: Int, deadline: Deadline) throws(RedisClientError) {
        let functions = context.functions
        functions.errorClear()
        guard let ssl = functions.new(context.context) else {
            throw RedisClientError(.connect, "OpenSSL could not make a TLS session: \(functions.queuedErrors())")
        }
        let incoming = functions.bioNew(functions.bioMemory()), outgoing = functions.bioNew(functions.bioMemory())
        guard let incoming, let outgoing else {
            for buffer in [incoming, outgoing] where buffer != nil { _ = functions.bioFree(buffer) }
            functions.free(ssl)
            throw RedisClientError(.connect, "OpenSSL could not make its buffers: \(functions.queuedErrors())")
        }
        functions.setBIO(ssl, incoming, outgoing) // the session owns both from here
        self.functions = functions
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        self.fd = fd
        try expect(host: host, verifying: !context.options.allowsUntrustedCertificates)
        try handshake(host: host, port: port, deadline: deadline)
    }

    deinit { functions.free(ssl) }

    /// Sends the server name (SNI) for a name, and has the certificate checked against the
    /// name or the address.
    private func expect(host: String, verifying: Bool) throws(RedisClientError) {
        var address = in6_addr()
        let isAddress = inet_pton(AF_INET, host, &address) == 1 || inet_pton(AF_INET6, host, &address) == 1
        if !isAddress {
            _ = host.withCString { functions.control(ssl, OpenSSL.controlSetHostName, OpenSSL.hostNameType, UnsafeMutableRawPointer(mutating: $0)) }
        }
        guard verifying else { return }
        let status = isAddress ? functions.parametersSetIP(functions.parameters(ssl), host) : functions.setHost(ssl, host)
        if status != 1 {
            throw RedisClientError(.connect, "cannot check Redis's certificate for '\(host)': \(functions.queuedErrors())")
        }
    }

    private func handshake(host: String, port: Int, deadline: Deadline) throws(RedisClientError) {
        functions.setConnectState(ssl)
        let what = "the TLS handshake with Redis at \(host):\(port)"
        while true {
            functions.errorClear()
            let status = functions.connect(ssl)
            let error = status == 1 ? OpenSSL.errorNone : functions.getError(ssl, status)
            let queued = functions.queuedErrors()
            try flush(deadline: deadline, what: what)
            switch error {
            case OpenSSL.errorNone: return
            case OpenSSL.errorWantRead: try fill(deadline: deadline, what: what, hint: " (is it a TLS port?)")
            case OpenSSL.errorWantWrite: continue
            default: throw RedisClientError(.connect, "\(what) failed: \(failure(queued))")
            }
        }
    }

    /// Why the handshake failed, in words: the certificate's problem when there is one.
    private func failure(_ queued: String) -> String {
        let verify = functions.verifyResult(ssl)
        if verify != 0, let text = functions.verifyErrorString(verify) {
            return "the server's certificate was not accepted (\(String(cString: text)))"
                + " — set RedisTLSOptions.caFile to the CA that signed it, or check the host name"
        }
        return queued.isEmpty ? "the server does not speak TLS, or closed the connection (is it a TLS port?)" : queued
    }

    /// Whether bytes from the server wait unread, in OpenSSL or in its buffer.
    var hasPendingInput: Bool { functions.pending(ssl) > 0 || functions.bioPending(incoming) > 0 }

    /// Encrypts `bytes` and sends them all by the deadline.
    /// - Throws: `RedisClientError` of kind `.timeout` past the deadline, `.closed` when the
    ///   connection fails.
    func write(_ bytes: [UInt8], deadline: Deadline, what: String) throws(RedisClientError) {
        try failing { () throws(RedisClientError) in try writeAll(bytes, deadline: deadline, what: what) }
    }

    private func writeAll(_ bytes: [UInt8], deadline: Deadline, what: String) throws(RedisClientError) {
        var offset = 0
        while offset < bytes.count {
            functions.errorClear()
            let chunk = Int32(clamping: bytes.count - offset)
            let written = bytes.withUnsafeBytes { functions.write(ssl, $0.baseAddress! + offset, chunk) }
            let error = written > 0 ? OpenSSL.errorNone : functions.getError(ssl, written)
            try flush(deadline: deadline, what: what)
            switch error {
            case OpenSSL.errorNone: offset += Int(written)
            case OpenSSL.errorWantRead: try fill(deadline: deadline, what: what)
            case OpenSSL.errorWantWrite: continue
            default: throw closedError(error, what)
            }
        }
    }

    /// Reads and decrypts what the server sent, waiting for it until the deadline.
    /// - Returns: how many bytes were placed at the start of `destination` (at least one).
    /// - Throws: `RedisClientError` of kind `.timeout` past the deadline, `.closed` when the
    ///   server closed the connection or it failed.
    func read(into destination: inout [UInt8], deadline: Deadline, what: String) throws(RedisClientError) -> Int {
        do throws(RedisClientError) {
            return try readSome(into: &destination, deadline: deadline, what: what)
        } catch {
            isFailed = true
            throw error
        }
    }

    private func readSome(into destination: inout [UInt8], deadline: Deadline, what: String) throws(RedisClientError) -> Int {
        while true {
            functions.errorClear()
            let count = destination.withUnsafeMutableBytes { functions.read(ssl, $0.baseAddress, Int32(clamping: $0.count)) }
            if count > 0 { return Int(count) }
            let error = functions.getError(ssl, count)
            try flush(deadline: deadline, what: what)
            switch error {
            case OpenSSL.errorWantRead: try fill(deadline: deadline, what: what)
            case OpenSSL.errorWantWrite: continue
            case OpenSSL.errorZeroReturn: throw RedisClientError(.closed, "Redis closed the TLS connection before answering \(what)")
            default: throw closedError(error, what)
            }
        }
    }

    /// Runs `body`, remembering that the session failed if it throws.
    private func failing(_ body: () throws(RedisClientError) -> Void) throws(RedisClientError) {
        do throws(RedisClientError) {
            try body()
        } catch {
            isFailed = true
            throw error
        }
    }

    /// Sends TLS's `close_notify` if the socket takes it at once; never waits. Nothing after a
    /// failed call (OpenSSL forbids it after a fatal error, and a record may be half sent).
    func shutdown() {
        guard !isFailed else { return }
        functions.errorClear()
        _ = functions.shutdown(ssl)
        functions.errorClear()
        let count = buffer.withUnsafeMutableBytes { functions.bioRead(outgoing, $0.baseAddress, Int32($0.count)) }
        if count > 0 {
            _ = buffer.withUnsafeBytes { systemSend(fd, $0.baseAddress!, Int(count), sendFlags | Int32(MSG_DONTWAIT)) }
        }
    }

    private func closedError(_ error: Int32, _ what: String) -> RedisClientError {
        let queued = functions.queuedErrors()
        return RedisClientError(.closed, "TLS failed on \(what) (OpenSSL error \(error)\(queued.isEmpty ? "" : ": \(queued)"))")
    }

    /// Sends everything OpenSSL has encrypted.
    private func flush(deadline: Deadline, what: String) throws(RedisClientError) {
        while functions.bioPending(outgoing) > 0 {
            let count = buffer.withUnsafeMutableBytes { functions.bioRead(outgoing, $0.baseAddress, Int32($0.count)) }
            guard count > 0 else { return }
            var offset = 0
            while offset < Int(count) {
                let sent = buffer.withUnsafeBytes { systemSend(fd, $0.baseAddress! + offset, Int(count) - offset, sendFlags) }
                if sent > 0 {
                    offset += sent
                } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                    try RedisConnection.wait(fd: fd, for: Int16(POLLOUT), deadline: deadline) {
                        RedisClientError(.timeout, "no progress on \(what) within \(deadline.seconds) s")
                    }
                } else if sent < 0 && errno == EINTR {
                    continue
                } else {
                    throw RedisClientError(.closed, "sending \(what) over TLS failed: \(String(cString: strerror(errno)))")
                }
            }
        }
    }

    /// Waits for bytes from the server and hands them to OpenSSL.
    private func fill(deadline: Deadline, what: String, hint: String = "") throws(RedisClientError) {
        while true {
            try RedisConnection.wait(fd: fd, for: Int16(POLLIN), deadline: deadline) {
                RedisClientError(.timeout, "no progress on \(what) within \(deadline.seconds) s")
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if count > 0 {
                let taken = buffer.withUnsafeBytes { functions.bioWrite(incoming, $0.baseAddress, Int32(count)) }
                guard taken == Int32(count) else { throw RedisClientError(.closed, "OpenSSL did not take the bytes of \(what)") }
                return
            }
            if count == 0 { throw RedisClientError(.closed, "Redis closed the connection during \(what)\(hint)") }
            if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
            throw RedisClientError(.closed, "reading \(what) over TLS failed: \(String(cString: strerror(errno)))")
        }
    }
}
