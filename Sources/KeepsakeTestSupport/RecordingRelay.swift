import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP relay on loopback that forwards every connection to `upstream` and records every byte
/// in both directions: what a network observer between a device and a server sees.
package final class RecordingRelay: @unchecked Sendable {
    // Sendable: the listener is written once; the recording sits behind a mutex.
    package let port: UInt16
    private let listener: Int32
    private let upstream: UInt16
    private let recorded = Mutex(Data())
    /// TPM framing (a relay to a TPM's command channel, `replayingTPM`): the first response seen
    /// to each command code, the code answered from those instead of forwarded, and how often.
    private let tpm = Mutex(TPMReplay())
    private let framed: Bool

    private struct TPMReplay {
        var firstResponse: [UInt32: Data] = [:]
        var replaying: UInt32?
        var replays: [UInt32: Int] = [:]
    }

    /// Every byte that crossed the relay so far, both directions, in arrival order.
    package var capture: Data { recorded.withLock { $0 } }

    /// Listens on `port` (0: any free one) and forwards to `upstreamPort`. `replayingTPM`: the
    /// upstream is a TPM's command channel (raw TPM 2.0 commands and responses), and the relay
    /// can answer a command with an earlier response instead of forwarding it
    /// (`answerFromEarlier`): what someone on the TPM connection can replay.
    package init(
        to upstreamPort: UInt16, listeningOn requested: UInt16 = 0, replayingTPM: Bool = false
    ) throws {
        upstream = upstreamPort
        framed = replayingTPM
        (listener, port) = try Loopback.listen(on: requested)
        Thread { [self] in acceptLoop() }.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            // Close-on-exec: no process the tests start meanwhile keeps the connection.
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let server = socket(
                AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = Loopback.address(upstream)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            let done = Mutex(0)
            let pending = Mutex<[UInt32]>([])  // command codes forwarded, not yet answered
            for (from, to) in [(client, server), (server, client)] {
                Thread { [self] in
                    if framed {
                        pumpTPM(from, to, commands: from == client, pending: pending)
                    } else {
                        pump(from, to)
                    }
                    shutdown(to, Int32(SHUT_WR))
                    let finished = done.withLock {
                        $0 += 1
                        return $0 == 2
                    }
                    if finished {
                        close(client)
                        close(server)
                    }
                }.start()
            }
        }
    }

    /// From now on answers every command with `commandCode` with the first response the TPM gave
    /// to one (nil: forwards everything again).
    package func answerFromEarlier(_ commandCode: UInt32?) {
        tpm.withLock { $0.replaying = commandCode }
    }

    /// How many commands with `commandCode` were answered from earlier.
    package func replays(of commandCode: UInt32) -> Int {
        tpm.withLock { $0.replays[commandCode] ?? 0 }
    }

    /// Pumps whole TPM messages (10-byte header: tag, size, command or response code).
    private func pumpTPM(
        _ from: Int32, _ to: Int32, commands: Bool, pending: borrowing Mutex<[UInt32]>
    ) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var message = Data()
        while true {
            let got = recv(from, &buffer, buffer.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return }
            recorded.withLock { $0.append(contentsOf: buffer[0..<got]) }
            message.append(contentsOf: buffer[0..<got])
            while message.count >= 10 {
                let size = Int(Self.word(message, at: 2))
                guard size >= 10, size <= 1 << 20 else { return }
                guard message.count >= size else { break }
                let whole = Data(message.prefix(size))
                message = Data(message.dropFirst(size))
                if commands {
                    let code = Self.word(whole, at: 6)
                    let earlier = tpm.withLock { replay -> Data? in
                        guard replay.replaying == code, let earlier = replay.firstResponse[code]
                        else { return nil }
                        replay.replays[code, default: 0] += 1
                        return earlier
                    }
                    if let earlier {  // answered here; the TPM never sees the command
                        guard Self.deliver(earlier, to: from) else { return }
                        continue
                    }
                    pending.withLock { $0.append(code) }
                } else if let code = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    tpm.withLock { replay in  // a success, to be answered again
                        if replay.firstResponse[code] == nil && Self.word(whole, at: 6) == 0 {
                            replay.firstResponse[code] = whole
                        }
                    }
                }
                guard Self.deliver(whole, to: to) else { return }
            }
        }
    }

    private static func word(_ data: Data, at offset: Int) -> UInt32 {
        data.dropFirst(offset).prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    private static func deliver(_ data: Data, to socket: Int32) -> Bool {
        data.withUnsafeBytes { bytes in
            var sent = 0
            while sent < bytes.count {
                let n = send(
                    socket, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                guard n > 0 else { return false }
                sent += n
            }
            return true
        }
    }

    private func pump(_ from: Int32, _ to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let got = recv(from, &buffer, buffer.count, 0)
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return }
            recorded.withLock { $0.append(contentsOf: buffer[0..<got]) }
            var sent = 0
            while sent < got {
                let n = buffer.withUnsafeBytes {
                    send(to, $0.baseAddress! + sent, got - sent, Int32(MSG_NOSIGNAL))
                }
                guard n > 0 else { return }
                sent += n
            }
        }
    }
}
