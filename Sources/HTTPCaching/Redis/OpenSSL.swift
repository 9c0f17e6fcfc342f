import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The OpenSSL 3 functions TLS to Redis needs, looked up once in the system's `libssl.so.3`
/// and `libcrypto.so.3` with `dlopen` and `dlsym`: the libraries libcurl, and so
/// FoundationNetworking, already links on Debian and Ubuntu, so no headers, no package and no
/// link flag are needed. Every pointer is opaque; the constants are OpenSSL 3's ABI.
enum OpenSSL {
    typealias Handle = OpaquePointer

    /// The functions, or why they could not be loaded (a sentence naming what to install).
    static let loaded = load(ssl: "libssl.so.3", crypto: "libcrypto.so.3")

    /// Opens the two libraries and looks up every function.
    static func load(ssl sslName: String, crypto cryptoName: String) -> Result<Functions, HTTPCachingError> {
        guard let crypto = dlopen(cryptoName, RTLD_NOW | RTLD_LOCAL), let ssl = dlopen(sslName, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(.unavailable(reason: "TLS to Redis (rediss://) needs OpenSSL 3, loaded at run time from "
                + "\(sslName) and \(cryptoName), which could not be loaded (\(reason)): install the libssl3 "
                + "package (apt-get install libssl3), or reach Redis through a local TLS tunnel such as stunnel"))
        }
        do throws(MissingSymbol) {
            return .success(try Functions(ssl: ssl, crypto: crypto))
        } catch {
            return .failure(.unavailable(reason: "TLS to Redis (rediss://) needs OpenSSL 3, and \(sslName) lacks "
                + "\(error.symbol): install the libssl3 package (apt-get install libssl3)"))
        }
    }

    // Constants of OpenSSL 3's ABI (the macros in ssl.h, x509_vfy.h and tls1.h).
    static let verifyNone: Int32 = 0
    static let verifyPeer: Int32 = 1
    static let fileTypePEM: Int32 = 1
    static let errorNone: Int32 = 0
    static let errorSSL: Int32 = 1
    static let errorWantRead: Int32 = 2
    static let errorWantWrite: Int32 = 3
    static let errorSyscall: Int32 = 5
    static let errorZeroReturn: Int32 = 6
    static let controlSetHostName: Int32 = 55 // SSL_CTRL_SET_TLSEXT_HOSTNAME
    static let hostNameType = 0 // TLSEXT_NAMETYPE_host_name
    static let controlSetMinimumVersion: Int32 = 123 // SSL_CTRL_SET_MIN_PROTO_VERSION
    static let version12 = 0x0303 // TLS1_2_VERSION

    struct MissingSymbol: Error {
        let symbol: String
    }

    /// The entry points, as C function pointers.
    struct Functions: @unchecked Sendable {
        typealias Pointer = OpaquePointer?
        typealias Text = UnsafePointer<CChar>?
        let clientMethod: @convention(c) () -> Pointer
        let contextNew: @convention(c) (Pointer) -> Pointer
        let contextFree: @convention(c) (Pointer) -> Void
        let contextControl: @convention(c) (Pointer, Int32, Int, UnsafeMutableRawPointer?) -> Int
        let contextSetDefaultVerifyPaths: @convention(c) (Pointer) -> Int32
        let contextLoadVerifyLocations: @convention(c) (Pointer, Text, Text) -> Int32
        let contextSetVerify: @convention(c) (Pointer, Int32, UnsafeMutableRawPointer?) -> Void
        let contextUseCertificateChainFile: @convention(c) (Pointer, Text) -> Int32
        let contextUsePrivateKeyFile: @convention(c) (Pointer, Text, Int32) -> Int32
        let contextCheckPrivateKey: @convention(c) (Pointer) -> Int32
        let new: @convention(c) (Pointer) -> Pointer
        let free: @convention(c) (Pointer) -> Void
        let setBIO: @convention(c) (Pointer, Pointer, Pointer) -> Void
        let control: @convention(c) (Pointer, Int32, Int, UnsafeMutableRawPointer?) -> Int
        let setHost: @convention(c) (Pointer, Text) -> Int32
        let parameters: @convention(c) (Pointer) -> Pointer
        let parametersSetIP: @convention(c) (Pointer, Text) -> Int32
        let setConnectState: @convention(c) (Pointer) -> Void
        let connect: @convention(c) (Pointer) -> Int32
        let read: @convention(c) (Pointer, UnsafeMutableRawPointer?, Int32) -> Int32
        let write: @convention(c) (Pointer, UnsafeRawPointer?, Int32) -> Int32
        let pending: @convention(c) (Pointer) -> Int32
        let getError: @convention(c) (Pointer, Int32) -> Int32
        let shutdown: @convention(c) (Pointer) -> Int32
        let verifyResult: @convention(c) (Pointer) -> Int
        let verifyErrorString: @convention(c) (Int) -> Text
        let errorGet: @convention(c) () -> UInt
        let errorString: @convention(c) (UInt, UnsafeMutablePointer<CChar>?, Int) -> Void
        let errorClear: @convention(c) () -> Void
        let bioNew: @convention(c) (Pointer) -> Pointer
        let bioMemory: @convention(c) () -> Pointer
        let bioFree: @convention(c) (Pointer) -> Int32
        let bioRead: @convention(c) (Pointer, UnsafeMutableRawPointer?, Int32) -> Int32
        let bioWrite: @convention(c) (Pointer, UnsafeRawPointer?, Int32) -> Int32
        let bioPending: @convention(c) (Pointer) -> Int

        fileprivate init(ssl: UnsafeMutableRawPointer, crypto: UnsafeMutableRawPointer) throws(MissingSymbol) {
            func find<T>(_ handle: UnsafeMutableRawPointer, _ name: String) throws(MissingSymbol) -> T {
                guard let address = dlsym(handle, name) else { throw MissingSymbol(symbol: name) }
                return unsafeBitCast(address, to: T.self)
            }
            clientMethod = try find(ssl, "TLS_client_method")
            contextNew = try find(ssl, "SSL_CTX_new")
            contextFree = try find(ssl, "SSL_CTX_free")
            contextControl = try find(ssl, "SSL_CTX_ctrl")
            contextSetDefaultVerifyPaths = try find(ssl, "SSL_CTX_set_default_verify_paths")
            contextLoadVerifyLocations = try find(ssl, "SSL_CTX_load_verify_locations")
            contextSetVerify = try find(ssl, "SSL_CTX_set_verify")
            contextUseCertificateChainFile = try find(ssl, "SSL_CTX_use_certificate_chain_file")
            contextUsePrivateKeyFile = try find(ssl, "SSL_CTX_use_PrivateKey_file")
            contextCheckPrivateKey = try find(ssl, "SSL_CTX_check_private_key")
            new = try find(ssl, "SSL_new")
            free = try find(ssl, "SSL_free")
            setBIO = try find(ssl, "SSL_set_bio")
            control = try find(ssl, "SSL_ctrl")
            setHost = try find(ssl, "SSL_set1_host")
            parameters = try find(ssl, "SSL_get0_param")
            parametersSetIP = try find(crypto, "X509_VERIFY_PARAM_set1_ip_asc")
            setConnectState = try find(ssl, "SSL_set_connect_state")
            connect = try find(ssl, "SSL_connect")
            read = try find(ssl, "SSL_read")
            write = try find(ssl, "SSL_write")
            pending = try find(ssl, "SSL_pending")
            getError = try find(ssl, "SSL_get_error")
            shutdown = try find(ssl, "SSL_shutdown")
            verifyResult = try find(ssl, "SSL_get_verify_result")
            verifyErrorString = try find(crypto, "X509_verify_cert_error_string")
            errorGet = try find(crypto, "ERR_get_error")
            errorString = try find(crypto, "ERR_error_string_n")
            errorClear = try find(crypto, "ERR_clear_error")
            bioNew = try find(crypto, "BIO_new")
            bioMemory = try find(crypto, "BIO_s_mem")
            bioFree = try find(crypto, "BIO_free")
            bioRead = try find(crypto, "BIO_read")
            bioWrite = try find(crypto, "BIO_write")
            bioPending = try find(crypto, "BIO_ctrl_pending")
        }

        /// The errors OpenSSL queued on this thread, oldest first, as its own strings (for
        /// example `error:0A000086:SSL routines::certificate verify failed`); empties the queue.
        func queuedErrors() -> String {
            var messages: [String] = []
            var buffer = [CChar](repeating: 0, count: 256)
            while case let code = errorGet(), code != 0 {
                errorString(code, &buffer, buffer.count)
                messages.append(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
            }
            return messages.joined(separator: "; ")
        }
    }
}
