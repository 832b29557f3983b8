import Escrow
import Foundation
import Platform
import Sealing
import Synchronization

/// A `keepsake-escrow` service (docs/running.md, "Running a guess counter or an escrow"): the
/// cloud account's escrow (the account key, for joining with a passcode) or a device's guess
/// counter; either counts every claim itself. A device reaches it only through its protocol
/// (`EscrowProtocol`), never its count.
public struct EscrowConfiguration: Sendable, Hashable {
    /// The escrow's address: `https://escrow.example/`, plain `http://127.0.0.1:PORT/`, or a
    /// guess counter's UNIX socket, `unix:/run/keepsake/counter.sock`.
    public let url: URL
    /// A CA certificate file to verify the escrow's TLS certificate with (nil: the system's).
    public let caFile: String?

    /// The socket a guess counter listens on.
    public static let defaultCounter = URL(string: "unix:/run/keepsake/counter.sock")!

    /// nil for an address that is not `https://…`, plain `http://127.0.0.1…` or `unix:` with an
    /// absolute path. Plain HTTP authenticates nothing, so it is taken only at the one address
    /// the service listens on: not `localhost`, which may resolve to `::1` first, nor `::1`,
    /// where the service does not listen and any other process of the machine may. (A guess
    /// counter is registered with only through its socket: `makeSlot`.)
    public init?(url: URL, caFile: String? = nil) {
        guard let scheme = url.scheme?.lowercased() else { return nil }
        if scheme == "unix" {
            guard url.path.hasPrefix("/"), url.path.utf8.count < 108, url.host == nil else {
                return nil
            }
        } else {
            guard let host = url.host?.lowercased(),
                scheme == "https" || (scheme == "http" && host == "127.0.0.1")
            else { return nil }
        }
        self.url = url
        self.caFile = caFile
    }

    /// The UNIX socket's path, for a `unix:` address.
    package var socket: String? { url.scheme?.lowercased() == "unix" ? url.path : nil }

    /// The protocol's client (10 s per request): over HTTP(S) with one libcurl handle, or over
    /// the UNIX socket to `peer` only (`LocalService`).
    package func client(peer: LocalService.Peer = .anyOtherUser) -> EscrowClient {
        EscrowClient(transport: transport(peer: peer))
    }

    /// One request to the escrow and its answer: what `client()` sends through (and a test that
    /// speaks the protocol the way an attacker would). On a socket, `seen` keeps the uid of
    /// whoever answered.
    package func transport(
        peer: LocalService.Peer = .anyOtherUser, seen: PeerSeen? = nil
    ) -> EscrowClient.Transport {
        let base = url
        if let socket {
            return { (method, path, body) throws(EscrowError) in
                // After a first answer, only the user who gave it (a registration's second
                // request carries the verifier and the envelope).
                let expected = seen?.uid.map(LocalService.Peer.user) ?? peer
                do throws(LocalService.Failure) {
                    let answer = try LocalService.exchange(
                        socket: socket, peer: expected, method: method, target: path, body: body,
                        limit: EscrowProtocol.maximumMessage, timeout: 10)
                    seen?.note(answer.peer)
                    return (answer.status, answer.body)
                } catch {
                    throw EscrowError(
                        error.isNotTheService ? .notTheService : .unavailable,
                        "the guess counter at \(base.absoluteString): \(error.message)")
                }
            }
        }
        let http = HTTP.Client()
        let caFile = caFile
        return { (method, path, body) throws(EscrowError) in
            let target = base.appendingPathComponent(String(path.dropFirst()))
            do {
                let response = try HTTP.exchange(
                    method, target, on: http, credentials: nil,
                    headers: ["Content-Type": "application/octet-stream"],
                    body: method == "GET" ? nil : body, limit: EscrowProtocol.maximumMessage,
                    timeout: 10, caFile: caFile)
                return (Int(response.status), response.body)
            } catch let failure as HTTP.Failure {
                throw EscrowError(
                    .unavailable, "the escrow at \(base.absoluteString): \(failure.message)")
            } catch {
                throw EscrowError(.unavailable, "the escrow at \(base.absoluteString): \(error)")
            }
        }
    }
}

/// The uid that answered on a guess counter's socket (what a registration pins).
package final class PeerSeen: Sendable {
    private let seen = Mutex<uid_t?>(nil)
    package init() {}
    func note(_ uid: uid_t) { seen.withLock { $0 = $0 ?? uid } }
    package var uid: uid_t? { seen.withLock { $0 } }
}

extension EscrowConfiguration {
    /// One passcode claim on `slot` at the cloud account's escrow (authenticated by TLS): the
    /// passcode key derived with the salt and cost the escrow keeps (the cloud cannot swap them;
    /// bounded before Argon2id runs; reading them spends no claim), the evaluation checked
    /// against the key the escrow names, then the claim, counted by the escrow. Returns the
    /// passcode key and what the escrow released. `failure` words the escrow's refusals (the
    /// account escrow's by default; a guess counter's are its own).
    package func claim(
        _ slot: Data, passcode: SecureBytes,
        failure: (EscrowError) -> DeviceError = DeviceError.init(escrow:)
    ) throws(DeviceError) -> (passcodeKey: SecureBytes, released: EscrowClient.Released) {
        let client = client()
        let status: EscrowClient.SlotStatus
        do { status = try client.status(of: slot) } catch { throw failure(error) }
        let passcodeKey = try PasscodeKeys.passcodeKey(
            passcode, salt: status.salt, cost: status.cost)
        do {
            let released = try client.claim(
                slot, passcodeKey: passcodeKey, publicKey: status.publicKey)
            return (passcodeKey, released)
        } catch { throw failure(error) }
    }
}
