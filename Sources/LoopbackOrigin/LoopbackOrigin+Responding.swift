import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Writing a response to a connection: a fixed body (at once, or paced), a body the test
// streams, a gate to wait at, or a fault to commit instead.

extension LoopbackOrigin {
    /// What to do with a connection once a response has been written.
    enum Next {
        case keepAlive
        case close
    }

    /// Writes one response (or commits its fault); says whether the connection may serve
    /// another request.
    func respond(_ response: Response, to request: Request, on fd: Int32) -> Next {
        if response.delay > 0 && !pause(response.delay) { return .close }
        if let gate = response.headGate {
            gate.arrive()
            guard wait(at: gate) else { return .close }
        }
        if let raw = response.raw {
            Self.writeAll(fd, raw)
            return .close
        }
        switch response.fault {
        case .reset?:
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            return .close
        case .hang?:
            // Hold the connection until the client (or stop()) closes it.
            var byte: UInt8 = 0
            while recv(fd, &byte, 1, 0) > 0 {}
            return .close
        case .truncate?:
            let whole = Self.serialize(response)
            Self.writeAll(fd, whole.prefix(whole.count - max(1, response.body.count / 2)))
            return .close
        case nil:
            break
        }
        let hasBody = request.method != "HEAD" && Self.statusHasBody(response.status)
        if let stream = response.stream {
            return respond(response, streaming: stream, hasBody: hasBody, on: fd)
        }
        guard Self.writeAll(fd, Self.head(response, framing: .length(response.body.count))) else { return .close }
        if let gate = response.bodyGate {
            gate.arrive()
            guard wait(at: gate) else { return .close }
        }
        guard hasBody else { return .keepAlive }
        if let pace = response.pace {
            return sendPaced(response.body, pace: pace, on: fd) ? .keepAlive : .close
        }
        return Self.writeAll(fd, response.body) ? .keepAlive : .close
    }

    /// Sends a streamed body as the test writes it, until it finishes, the client leaves or
    /// the origin stops.
    private func respond(_ response: Response, streaming stream: BodyStream, hasBody: Bool, on fd: Int32) -> Next {
        guard stream.attach() else {
            Self.writeAll(fd, Self.serialize(Response(status: 500, headers: [("Connection", "close")],
                                                 text: "this BodyStream already served a response\n")))
            return .close
        }
        let framing: Framing = switch stream.framing {
        case .chunked: .chunked
        case .contentLength(let length): .length(length)
        case .untilClose: .untilClose
        }
        guard Self.writeAll(fd, Self.head(response, framing: framing)) else { stream.end(.clientClosed); return .close }
        stream.state.update { $0.headersSent = true }
        if let gate = response.bodyGate {
            gate.arrive()
            guard wait(at: gate) else { stream.end(.originStopped); return .close }
        }
        while true {
            let (chunks, finish) = stream.take()
            guard writeChunks(chunks, of: stream, chunked: framing == .chunked, hasBody: hasBody, on: fd) else {
                stream.end(.clientClosed)
                return .close
            }
            if finish { return finishBody(of: stream, hasBody: hasBody, on: fd) }
            if let ending = waitForMore(of: stream, on: fd) {
                stream.end(ending)
                return .close
            }
        }
    }

    /// Writes the chunks the test queued (each framed as a chunk when `chunked`), counting
    /// them as sent; without a body, counts everything written as sent.
    /// - Returns: false if a write failed.
    private func writeChunks(_ chunks: [Data], of stream: BodyStream, chunked: Bool, hasBody: Bool, on fd: Int32) -> Bool {
        for chunk in chunks where hasBody {
            var bytes = Data()
            if chunked { bytes.append(Data((String(chunk.count, radix: 16) + "\r\n").utf8)) }
            bytes.append(chunk)
            if chunked { bytes.append(Data("\r\n".utf8)) }
            guard Self.writeAll(fd, bytes) else { return false }
            stream.state.update { $0.bytesSent += chunk.count }
        }
        if !hasBody { stream.state.update { $0.bytesSent = $0.bytesWritten } }
        return true
    }

    /// Ends a streamed body the test finished: the last chunk, or a close when the body has
    /// no length or not the length announced.
    private func finishBody(of stream: BodyStream, hasBody: Bool, on fd: Int32) -> Next {
        var next = Next.keepAlive
        switch stream.framing {
        case .chunked:
            if hasBody && !Self.writeAll(fd, Data("0\r\n\r\n".utf8)) { stream.end(.clientClosed); return .close }
        case .contentLength(let length):
            if hasBody && stream.bytesSent != length { next = .close }
        case .untilClose:
            next = .close
        }
        stream.end(.finished)
        return next
    }

    /// Waits until the test writes more, the client hangs up or the origin stops.
    /// - Returns: how the response ended; nil if there is more to send.
    private func waitForMore(of stream: BodyStream, on fd: Int32) -> BodyStream.Ending? {
        #if os(Linux)
        let hangUp: Int32 = 0x2000 // POLLRDHUP: the peer closed; Glibc's module does not export it
        #else
        let hangUp = Int32(POLLIN)
        #endif
        let ready = pollReady([(stopPipe.readEnd, Int32(POLLIN)), (stream.wake.readEnd, Int32(POLLIN)), (fd, hangUp)],
                              timeout: nil)
        if ready[0] != 0 { return .originStopped }
        if ready[2] != 0 { return .clientClosed }
        return nil
    }

    /// Sends a body in chunks at a rate, measured from the first byte so pauses do not drift.
    /// - Returns: false if the client left or the origin stopped.
    private func sendPaced(_ body: Data, pace: Pace, on fd: Int32) -> Bool {
        let start = Date()
        var offset = 0
        while offset < body.count {
            let due = start.addingTimeInterval(Double(offset) / Double(pace.bytesPerSecond))
            let wait = due.timeIntervalSinceNow
            if wait > 0 && !pause(wait) { return false }
            let end = min(body.count, offset + pace.chunkSize)
            guard Self.writeAll(fd, body[(body.startIndex + offset)..<(body.startIndex + end)]) else { return false }
            offset = end
        }
        return true
    }

    /// Waits `seconds` inside the origin (for delays and pacing).
    /// - Returns: false if the origin stopped meanwhile.
    func pause(_ seconds: TimeInterval) -> Bool {
        pollReady([(stopPipe.readEnd, Int32(POLLIN))], timeout: seconds)[0] == 0
    }

    /// Waits until a gate opens.
    /// - Returns: false if the origin stopped first.
    private func wait(at gate: Gate) -> Bool {
        while !gate.isOpen {
            let ready = pollReady([(stopPipe.readEnd, Int32(POLLIN)), (gate.wake.readEnd, Int32(POLLIN))], timeout: nil)
            if ready[0] != 0 { return false }
        }
        return true
    }

    /// Writes all of `data` to `fd`; false when the peer is gone.
    @discardableResult
    static func writeAll<D: DataProtocol>(_ fd: Int32, _ data: D) -> Bool {
        let bytes = Array(data)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}
