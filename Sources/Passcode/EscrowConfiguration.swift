import Escrow
import Foundation
import Platform
import Sealing

/// A `keepsake-escrow` service (docs/running.md, "Running a guess counter or an escrow"): the
/// cloud account's escrow (the account key, for joining with a passcode) or a device's guess
/// counter; either counts every claim itself. A device reaches it only through its protocol
/// (`EscrowProtocol`), never its count.
public struct EscrowConfiguration: Sendable, Hashable {
    /// The escrow's address: `https://escrow.example/` (or `http://127.0.0.1:PORT/`).
    public let url: URL
    /// A CA certificate file to verify the escrow's TLS certificate with (nil: the system's).
    public let caFile: String?

    /// nil for an address that is not `https://…` or plain `http://127.0.0.1…`. Plain HTTP
    /// authenticates nothing, so it is taken only at the one address the service listens on:
    /// not `localhost`, which may resolve to `::1` first, nor `::1`, where the service does not
    /// listen and any other process of the machine may.
    public init?(url: URL, caFile: String? = nil) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(),
            scheme == "https" || (scheme == "http" && host == "127.0.0.1")
        else { return nil }
        self.url = url
        self.caFile = caFile
    }

    /// The protocol's client over HTTP (one libcurl handle, 10 s per request).
    package func client() -> EscrowClient { EscrowClient(transport: transport()) }

    /// One request to the escrow and its answer, over HTTP: what `client()` sends through (and a
    /// test that speaks the protocol the way an attacker would).
    package func transport() -> EscrowClient.Transport {
        let http = HTTP.Client()
        let base = url
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

extension EscrowConfiguration {
    /// One passcode claim on `slot` at this service (the account's escrow or the device's guess
    /// counter): the passcode key derived with the salt and cost the service keeps (the cloud or
    /// a rewritten record cannot swap them; bounded before Argon2id runs; reading them spends no
    /// claim), then the claim, counted by the service. Returns the passcode key and the released
    /// secret.
    package func claim(_ slot: Data, passcode: SecureBytes)
        throws(DeviceError) -> (passcodeKey: SecureBytes, secret: SecureBytes)
    {
        let client = client()
        let status = try escrowCall { () throws(EscrowError) in try client.status(of: slot) }
        let passcodeKey = try PasscodeKeys.passcodeKey(
            passcode, salt: status.salt, cost: status.cost)
        let secret = try escrowCall { () throws(EscrowError) in
            try client.claim(slot, passcodeKey: passcodeKey)
        }
        return (passcodeKey, secret)
    }
}

/// Runs an escrow call: its failures become the device's errors (a wrong passcode
/// `.authFailed`; a destroyed slot or an unreachable escrow `.notAvailable`).
package func escrowCall<R>(_ body: () throws(EscrowError) -> R) throws(DeviceError) -> R {
    do { return try body() } catch {
        switch error.code {
        case .authFailed:
            throw DeviceError(
                .authFailed, "wrong passcode for the cloud account", underlying: error)
        case .destroyed:
            throw DeviceError(
                .notAvailable,
                "\(EscrowProtocol.maximumLimit) wrong passcodes: the escrow record is destroyed; join by approval or with the recovery key",
                underlying: error)
        case .notFound:
            throw DeviceError(
                .notAvailable,
                "the escrow holds no record for this account (none registered, or removed): join by approval or with the recovery key",
                underlying: error)
        default:
            throw DeviceError(.notAvailable, "\(error.message)", underlying: error)
        }
    }
}
