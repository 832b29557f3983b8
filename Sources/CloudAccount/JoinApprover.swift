import Device
import Foundation
import Platform
import Sealing

/// The approving side of a join by approval (`CloudAccount.approveJoin(code:)`): a device already
/// in the account answers the one waiting request with its share of the exchange keyed by the
/// code the user typed, and the account key sealed under the exchange's key. The joining side is
/// `JoinTicket`.
struct JoinApprover {
    /// The account the new device joins.
    let account: CloudAccount

    /// `CloudAccount.approveJoin(code:)`.
    func approve(code: String?) throws(DeviceError) {
        let cloud = try account.keys.signedIn()
        guard let code, JoinCode.isWellFormed(code) else {
            throw DeviceError(
                .invalidPasscode, "type the six-digit code the new device shows (--code C)")
        }
        guard try account.device.state() == .unlocked, let accountKey = try account.keys.cloudKey()
        else {
            throw DeviceError(
                .interactionNotAllowed, "approving needs this device unlocked and in the account")
        }
        let pending = try JoinRequest.pending(on: cloud)
        guard pending.count <= 1 else {
            for id in pending {
                for name in AccountObjects.joinObjects(id) { try? cloud.delete(name) }
            }
            throw DeviceError(
                .authFailed,
                "\(pending.count) join requests were waiting (one is the user's at most; the others are not): all withdrawn, nothing approved — start the join again on the new device"
            )
        }
        guard let id = pending.first,
            let bytes = try cloud.checked.read(AccountObjects.joinRequest(id)),
            let request = JoinRequestRecord.parse(bytes)
        else {
            throw DeviceError(
                .invalidPasscode,
                "no join request is waiting: start the join on the new device (device join --approval), then type the code it shows"
            )
        }
        let record = try account.device.accountState()
        // The state this device itself has seen (its own file, or its key's epoch): never the
        // cloud's account record, whose epoch the cloud could lower to void the vouching.
        let seen = account.manifests.seen.read(account: SeenManifest.account(accountKey))
        let approval = JoinApproval(
            accountKey: accountKey, epoch: seen?.epoch ?? record.account.cloudEpoch ?? 0,
            manifestVersion: seen?.version ?? 0
        ).encoded()
        // A code is answered once, whatever the cloud lists: a cloud that hid the new device's
        // request (so the user types the code again) gets no second guess of it.
        try answeredCodes.insert(code, device: record)
        let mine = PasswordKeyExchange.share(
            password: SecureBytes(copying: Data(code.utf8)), session: JoinCode.session(id))
        let key: SecureBytes
        do {
            key = try PasswordKeyExchange.key(
                secret: mine.secret, peerShare: request.share, initiatorShare: request.share,
                responderShare: mine.share, session: JoinCode.session(id))
        } catch {
            for name in AccountObjects.joinObjects(id) { try? cloud.delete(name) }
            throw DeviceError(
                .corrupt, "the join request holds no valid share: withdrawn, nothing approved",
                underlying: error)
        }
        let sealed = approval.withUnsafeBytes {
            Envelope.seal(
                $0, key: key,
                associatedData: JoinCode.approvalAssociatedData(
                    id, request: request.share, approver: mine.share))
        }
        // One answer a request (made only where there is none): each request is one guess of the
        // code, however often it is typed.
        let written = try cloud.checked.write(
            AccountObjects.joinApproval(id),
            JoinApprovalRecord(share: mine.share, sealed: sealed).encoded(), ifVersion: nil)
        guard written else {
            throw DeviceError(
                .invalidPasscode,
                "this join request was answered already: the new device takes that answer (or, with another code, stops); start the join again there if it did"
            )
        }
    }

    /// The codes this device approved with (`AnsweredCodes`).
    var answeredCodes: AnsweredCodes {
        AnsweredCodes(file: account.device.directory.appendingPathComponent("join-codes-answered"))
    }
}

/// The codes a device has approved joins with, as keyed hashes under its device secret (nothing a
/// reader of the directory can test a code against without that secret), the latest 256: each
/// code is answered once, so a cloud that hides the real request and shows its own gets one guess
/// of a code however often the user types it. A new device draws a new code for every request.
struct AnsweredCodes {
    let file: URL
    static let kept = 256

    /// Records `code`, or refuses it when it was answered before: read, checked and written
    /// under a lock every process of the user takes, so two approvals of one code at once answer
    /// once.
    func insert(_ code: String, device: HeldAccountState) throws(DeviceError) {
        let lock = try DeviceError.lock(
            file.deletingLastPathComponent().appendingPathComponent(
                file.lastPathComponent + ".lock"),
            "the approved codes' lock")
        defer { withExtendedLifetime(lock) {} }
        let digest = device.keyedHash(
            context: "keepsake.join.answered-code.v1", Data(code.utf8)
        ).unsafeData().hexString
        // A list that cannot be read is no empty list: written over, it would forget every code.
        let stored: Data?
        do { stored = try Files.read(file, limit: 64 * 1024) } catch {
            throw DeviceError(
                .notAvailable, "the approved codes could not be read: \(error)", underlying: error)
        }
        let known =
            stored.map {
                String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init)
            } ?? []
        guard !known.contains(digest) else {
            throw DeviceError(
                .authFailed,
                "this code was approved with already (a request the new device did not get is not answered twice): start the join again on the new device, which shows a new code"
            )
        }
        let kept = (known + [digest]).suffix(Self.kept).joined(separator: "\n")
        do { try Files.writeAtomically(Data(kept.utf8), to: file) } catch {
            throw DeviceError(
                .notAvailable, "the approved codes could not be kept: \(error)", underlying: error)
        }
    }
}
