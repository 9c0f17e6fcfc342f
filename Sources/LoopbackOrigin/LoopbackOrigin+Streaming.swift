import Foundation

extension LoopbackOrigin {
    /// A response body the test writes while the response is under way.
    ///
    /// Hand one to a route with `Response(status:headers:stream:)` (or `Response.eventStream`).
    /// The origin sends the status line and headers at once, then each chunk as the test
    /// `write`s it, and ends the body on `finish()`. A test can wait, without sleeping, until
    /// the headers went out (`headersSent`), until everything written so far went out
    /// (`flushed`), and until the response ended (`ended`): finished, the client went away,
    /// or the origin stopped. One stream serves one response: a second request given the same
    /// stream is answered 500.
    public final class BodyStream: @unchecked Sendable {
        /// How the body's end is told to the client.
        public enum Framing: Sendable, Equatable {
            /// `Transfer-Encoding: chunked`: each write is one chunk; `finish()` sends the last
            /// chunk and the connection stays open for the next request.
            case chunked
            /// `Content-Length` with this many bytes. If `finish()` comes after a different
            /// number of bytes, the origin closes the connection (a truncated or overlong body).
            case contentLength(Int)
            /// No length: `Connection: close`, and `finish()` closes the connection.
            case untilClose
        }

        /// How a streamed response ended.
        public enum Ending: Sendable, Equatable {
            /// The test called `finish()` and the end of the body was sent.
            case finished
            /// The client closed the connection (or a write to it failed).
            case clientClosed
            /// The origin was stopped.
            case originStopped
        }

        struct State: Sendable {
            var queue: [Data] = []
            var finishRequested = false
            var attached = false
            var headersSent = false
            var bytesWritten = 0
            var bytesSent = 0
            var ending: Ending?
        }

        /// How the body's end is told to the client.
        public let framing: Framing
        let state = Waitable(State())
        let wake = WakePipe()

        /// A stream to hand to one response.
        /// - Parameter framing: how the body's end is told. The default is chunked.
        public init(framing: Framing = .chunked) {
            self.framing = framing
        }

        /// Queues bytes to send as the next part of the body (one chunk when chunked). Empty
        /// writes, and writes after the response ended, are ignored.
        public func write(_ bytes: Data) {
            guard !bytes.isEmpty else { return }
            let accepted = state.update { state -> Bool in
                guard state.ending == nil, !state.finishRequested else { return false }
                state.queue.append(bytes)
                state.bytesWritten += bytes.count
                return true
            }
            if accepted { wake.signal() }
        }

        /// Queues UTF-8 text to send as the next part of the body.
        public func write(_ text: String) {
            write(Data(text.utf8))
        }

        /// Queues one server-sent event: optional `id:` and `event:` lines, one `data:` line per
        /// line of `data`, and the blank line that ends the event.
        public func writeEvent(data: String, event: String? = nil, id: String? = nil) {
            var text = ""
            if let id { text += "id: \(id)\n" }
            if let event { text += "event: \(event)\n" }
            for line in data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
            write(text + "\n")
        }

        /// Ends the body once everything written before has been sent. Calling it again does
        /// nothing.
        public func finish() {
            state.update { $0.finishRequested = true }
            wake.signal()
        }

        /// How the response ended; nil while it is still under way (or has not started).
        public var ending: Ending? { state.read(\.ending) }

        /// How many body bytes have been handed to the socket so far.
        public var bytesSent: Int { state.read(\.bytesSent) }

        /// Waits until the status line and headers have been written to the socket.
        /// - Returns: false if `timeout` seconds passed first, or the response ended before.
        public func headersSent(timeout: TimeInterval = 10) async -> Bool {
            await state.wait(timeout: timeout) { $0.headersSent || $0.ending != nil }
            return state.read(\.headersSent)
        }

        /// Waits until every byte written so far has been handed to the socket.
        /// - Returns: false if `timeout` seconds passed first, or the response ended before.
        public func flushed(timeout: TimeInterval = 10) async -> Bool {
            let target = state.read(\.bytesWritten)
            await state.wait(timeout: timeout) { $0.bytesSent >= target || $0.ending != nil }
            return state.read(\.bytesSent) >= target
        }

        /// Waits until the response ends: finished, the client went away, or the origin stopped.
        /// - Returns: how it ended; nil if `timeout` seconds passed first.
        public func ended(timeout: TimeInterval = 10) async -> Ending? {
            await state.wait(timeout: timeout) { $0.ending != nil }
            return ending
        }

        /// Claims the stream for one response; false if another response already has it.
        func attach() -> Bool {
            state.update { state in
                if state.attached { return false }
                state.attached = true
                return true
            }
        }

        /// Records how the response ended, unless an ending is recorded already.
        func end(_ ending: Ending) {
            state.update { if $0.ending == nil { $0.ending = ending } }
        }

        /// Takes the queued chunks, and whether `finish()` was asked for after them.
        func take() -> (chunks: [Data], finish: Bool) {
            wake.drain()
            return state.update { state in
                let chunks = state.queue
                state.queue.removeAll()
                return (chunks, state.finishRequested)
            }
        }
    }

    /// A gate a response waits at until the test opens it: proof of ordering without timers.
    ///
    /// Give it to a response as `headGate` (nothing is sent until it opens) or `bodyGate` (the
    /// status line and headers go out at once; the body waits). A test can wait until a given
    /// number of responses have reached the gate, and then assert what the client saw while
    /// the origin was still holding them. Once open, a gate stays open; it holds any number of
    /// responses at once. Stopping the origin releases every held response by closing its
    /// connection.
    public final class Gate: @unchecked Sendable {
        struct State: Sendable {
            var open = false
            var arrivals = 0
        }

        let state = Waitable(State())
        let wake = WakePipe()

        /// A closed gate.
        public init() {}

        /// Opens the gate: every held response goes on, and later ones pass straight through.
        public func open() {
            state.update { $0.open = true }
            wake.signal() // never drained: the pipe stays readable, the gate open
        }

        /// Whether the gate has been opened.
        public var isOpen: Bool { state.read(\.open) }

        /// How many responses have reached the gate so far, held or passed.
        public var arrivals: Int { state.read(\.arrivals) }

        /// Waits until at least `count` responses have reached the gate (for a head gate: nothing
        /// of them has been written; for a body gate: their headers have been written).
        /// - Returns: false if `timeout` seconds passed first.
        public func reached(count: Int = 1, timeout: TimeInterval = 10) async -> Bool {
            await state.wait(timeout: timeout) { $0.arrivals >= count }
        }

        /// Records that a response reached the gate.
        func arrive() {
            state.update { $0.arrivals += 1 }
        }
    }

    /// A rate to send a body at, for benchmarks: chunks of `chunkSize` bytes, each sent when
    /// the bytes before it would have taken `bytesPerSecond` to send.
    public struct Pace: Sendable, Equatable {
        /// The rate, in bytes per second (at least 1).
        public var bytesPerSecond: Int
        /// The bytes sent at once between pauses (at least 1). The default is 1024.
        public var chunkSize: Int

        /// A pace of `bytesPerSecond`, sent in chunks of `chunkSize` bytes.
        /// - Parameters:
        ///   - bytesPerSecond: the rate; values below 1 count as 1.
        ///   - chunkSize: the bytes sent at once; values below 1 count as 1. The default is 1024.
        public init(bytesPerSecond: Int, chunkSize: Int = 1024) {
            self.bytesPerSecond = max(1, bytesPerSecond)
            self.chunkSize = max(1, chunkSize)
        }
    }
}

extension LoopbackOrigin.Response {
    /// A response whose headers go out at once and whose body the test writes through `stream`.
    /// - Parameters:
    ///   - status: the status code. The default is 200.
    ///   - headers: header fields; the stream's framing field (`Transfer-Encoding: chunked`,
    ///     `Content-Length` or `Connection: close`) is added unless given.
    ///   - stream: the body, written by the test.
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], stream: LoopbackOrigin.BodyStream) {
        self.init(status: status, headers: headers)
        self.stream = stream
    }

    /// A never-ending server-sent-events response: `Content-Type: text/event-stream`,
    /// `Cache-Control: no-store`, no length; the test pushes events through `stream` with
    /// `writeEvent` and it ends when the client leaves, the test calls `finish()`, or the origin
    /// stops.
    /// - Parameters:
    ///   - stream: the events; create it with `.chunked` (the default) or `.untilClose` framing.
    ///   - headers: more header fields, after the two above.
    public static func eventStream(_ stream: LoopbackOrigin.BodyStream,
                                   headers: [(name: String, value: String)] = []) -> Self {
        Self(headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")] + headers, stream: stream)
    }

    /// A body of `count` bytes sent at `bytesPerSecond`, for benchmarks. The bytes are
    /// `LoopbackOrigin.filler(count:)`; `Content-Length` is sent first.
    /// - Parameters:
    ///   - count: the body's size in bytes.
    ///   - bytesPerSecond: the rate.
    ///   - chunkSize: the bytes sent at once. The default is 1024.
    ///   - headers: header fields.
    public static func paced(bytes count: Int, bytesPerSecond: Int, chunkSize: Int = 1024,
                             headers: [(name: String, value: String)] = []) -> Self {
        var response = Self(headers: headers, body: LoopbackOrigin.filler(count: count))
        response.pace = LoopbackOrigin.Pace(bytesPerSecond: bytesPerSecond, chunkSize: chunkSize)
        return response
    }

    /// A response written as exactly these bytes (status line, header lines, body, anything),
    /// after which the origin closes the connection. For malformed or hostile answers the
    /// structured form cannot express.
    public static func raw(_ bytes: Data) -> Self {
        var response = Self()
        response.raw = bytes
        return response
    }

    /// A response written as exactly this UTF-8 text; see `raw(_: Data)`.
    public static func raw(_ text: String) -> Self {
        raw(Data(text.utf8))
    }
}

extension LoopbackOrigin {
    /// `count` deterministic bytes (a repeating alphabet), for bodies whose content does not
    /// matter but whose size does.
    public static func filler(count: Int) -> Data {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789\n".utf8)
        return Data((0..<max(0, count)).map { alphabet[$0 % alphabet.count] })
    }
}
