import Escrow
import Device
import Foundation
import Platform
import Sealing
import Synchronization

/// Joining the cloud account: with the recovery key, with the passcode (through the account's
/// escrow, which counts the claims), or by the approval of a device already in it.
extension CloudAccount {
    /// Joins with an existing device's passcode, through the account's escrow service
    /// (`escrow`): it counts every claim before it answers and releases the account key only to
    /// the right passcode, at most 10 claims in a row without it from all devices and clients
    /// together; then it destroys the record for good.
    ///
    /// - Throws: `.invalidPasscode` for input that is not a passcode (never a claim);
    ///   `.authFailed` for a wrong passcode (counted); `.notAvailable` without an escrow (join by
    ///   approval or with the recovery key instead), when the record is gone or the escrow
    ///   unreachable; `.corrupt` when the cloud shows an older account state than the escrow's
    ///   witness keeps (rolled back: nothing joined).
    /// - Returns: whether the escrow's witness vouched that the cloud shows the account's latest
    ///   state (tell the user its `warning` when not).
    @discardableResult
    public func join(passcode: SecureBytes) throws(DeviceError) -> JoinVouching {
        try joinReporting(passcode: passcode).vouching
    }

    /// What a join by passcode did and has to tell the owner.
    public struct PasscodeJoin: Sendable {
        /// Whether anything vouched for the account's state joined (`join`).
        public var vouching: JoinVouching
        /// Wrong passcode claims at the account's escrow before this right one (by this or
        /// other devices trying to join): tell the owner.
        public var wrongPasscodes: WrongPasscodes?
    }

    /// `join(passcode:)`, with the escrow's report of the wrong claims before it: shown here,
    /// so acknowledged (the tries it showed come back to the account).
    public func joinReporting(passcode: SecureBytes) throws(DeviceError) -> PasscodeJoin {
        let cloud = try self.keys.signedIn()
        guard let escrow else {
            throw DeviceError(
                .notAvailable,
                "joining with a passcode needs the account's escrow (--escrow URL); join by approval of an existing device (device join --approval) or with the recovery key (device join --recovery-key)"
            )
        }
        try LockScreenKind.checkGuess(passcode)  // never a claim: refused before the escrow
        let read = try device.accountState()
        guard let found = try cloud.checked.read(AccountObjects.escrow) else {
            throw DeviceError(
                .notAvailable,
                "the cloud account has no escrow record (none registered, or destroyed after 10 wrong passcodes): join by approval or with the recovery key"
            )
        }
        guard let record = EscrowRecord.parse(found) else {
            throw DeviceError(.corrupt, "the cloud account's escrow record does not decode")
        }
        let released: (key: SecureBytes, seed: SecureBytes?)
        let report: EscrowClient.Released
        do throws(DeviceError) {
            report = try escrow.claim(record.slot, passcode: passcode).released
            released = AccountWitness.split(escrowSecret: report.secret)
        } catch {
            if (error.underlying as? EscrowError)?.code == .destroyed {
                try? cloud.delete(AccountObjects.escrow)  // it names nothing any more
            }
            throw error
        }
        let account = try self.keys.checkAccount(released.key)
        let vouching = try self.keys.checkWitness(
            released.key, seed: released.seed, account: account)
        try self.keys.adopt(released.key, witnessSeed: released.seed, since: read)
        try? escrow.client().acknowledge(record.slot, report)
        let wrong =
            report.wrongSinceRight == 0
            ? nil
            : WrongPasscodes(
                count: report.wrongSinceRight, last: report.lastWrong, since: report.firstWrong,
                atAccountEscrow: true)
        return PasscodeJoin(vouching: vouching, wrongPasscodes: wrong)
    }

    /// Wrong passcode claims at the account's escrow (devices trying to join with a passcode)
    /// that no right claim has reported yet: what this device's unlock (and `keepsake keychain
    /// sync`) tells the owner, read with the account key's reader key — nobody else is told.
    /// nil when there are none, or the escrow, the cloud or the account key is out of reach.
    public func escrowWrongClaims() -> WrongPasscodes? {
        guard let escrow, let cloud = try? keys.signedIn(),
            let held = try? keys.heldCloudKey(forUpload: false),
            let found = try? cloud.checked.read(AccountObjects.escrow),
            let record = EscrowRecord.parse(found),
            let status = try? escrow.client().count(
                of: record.slot, reader: EscrowProtocol.reader(secret: held.key)),
            let count = status.count, count.wrongSinceRight > 0
        else { return nil }
        return WrongPasscodes(
            count: count.wrongSinceRight, last: count.lastWrong, since: count.firstWrong,
            atAccountEscrow: true)
    }

    /// Joins with the recovery key shown when the account was created (or last replaced).
    ///
    /// - Throws: `.authFailed` for a key that is not the account's; `.invalidPasscode` for text
    ///   that is not a recovery key; `.corrupt` when the cloud shows an older account state than
    ///   the escrow's witness keeps, or an account the witness does not know (planted).
    /// - Returns: whether the escrow's witness vouched that the cloud shows the account's latest
    ///   state (tell the user its `warning` when not).
    @discardableResult
    public func join(recoveryKey text: SecureBytes) throws(DeviceError) -> JoinVouching {
        let cloud = try self.keys.signedIn()
        guard let key = RecoveryKey.parse(text) else {
            throw DeviceError(.invalidPasscode, "a recovery key is 32 base32 characters")
        }
        let read = try device.accountState()
        guard let sealed = try cloud.checked.read(AccountObjects.recovery) else {
            throw DeviceError(.notAvailable, "the cloud account has no recovery record")
        }
        let pair = RecoveryKey.keyPair(key)
        let accountKey: SecureBytes
        do {
            accountKey = try SealedBox.open(
                sealed, publicKey: pair.publicKey, secretKey: pair.secretKey)
        } catch {
            throw DeviceError(.authFailed, "not this account's recovery key")
        }
        guard AccountKey.isValid(accountKey) else {
            throw DeviceError(.corrupt, "the recovery record does not hold an account key")
        }
        let account = try self.keys.checkAccount(accountKey)
        let seed = AccountWitness.seed(recoveryKey: key)
        let vouching = try self.keys.checkWitness(accountKey, seed: seed, account: account)
        try self.keys.adopt(accountKey, witnessSeed: seed, since: read)
        return vouching
    }

    /// Posts a join request: a new random six-digit code to show (`awaitCode`) and this device's
    /// share of an exchange keyed by it. The code stays on this device; the user types it on an
    /// existing device (`approveJoin`).
    public func requestJoin() throws(DeviceError) -> JoinTicket {
        let cloud = try self.keys.signedIn()
        let id = KeyDerivation.randomBytes(8).hexString
        let code = JoinCode.random()
        let (secret, share) = PasswordKeyExchange.share(
            password: SecureBytes(copying: Data(code.utf8)), session: JoinCode.session(id))
        // A new name (64 random bits), made only where there is none.
        try keys.swap(
            AccountObjects.joinRequest(id), JoinRequestRecord(share: share).encoded(),
            ifVersion: nil, on: cloud, conflict: "post the join request again")
        return JoinTicket(id: id, code: code, secret: secret, share: share)
    }

    /// The six-digit code to show for `ticket`: the user types it on an existing device of the
    /// account (`approveJoin` there). Known as soon as the request is posted, so it returns at once
    /// (never nil); `timeout` is not waited on.
    public func awaitCode(of ticket: JoinTicket, timeout: Duration) throws(DeviceError) -> String? {
        _ = try self.keys.signedIn()
        return ticket.code
    }

    /// Waits up to `timeout` for an approval of `ticket`; true once joined. The first approval
    /// that comes must open under the key of the exchange keyed by this device's code: one that
    /// does not (the code typed wrong there, or one made by whoever sits between the devices)
    /// ends the request, so each request is one guess of its code. The approval vouches for the
    /// account's state, so a cloud that shows this device an older one is refused from then on.
    /// The request is withdrawn whenever this returns without joining.
    ///
    /// - Throws: `.authFailed` for an approval that does not open (a typo on the approving device,
    ///   or a device in the middle: start again, with a new code), or when the request was
    ///   withdrawn; nothing joined either way.
    public func awaitApproval(of ticket: JoinTicket, timeout: Duration) throws(DeviceError) -> Bool
    {
        let cloud = try self.keys.signedIn()
        guard
            ticket.used.withLock({ used in
                defer { used = true }; return !used
            })
        else {
            throw DeviceError(
                .authFailed, "this join request was waited on already: start the join again")
        }
        // Whatever ends the wait ends the request, a join included: a request is answered once.
        defer { for name in AccountObjects.joinObjects(ticket.id) { try? cloud.delete(name) } }
        let read = try device.accountState()
        guard
            let approval = try ticket.approval(on: cloud, until: ContinuousClock.now + timeout)
        else { return false }
        // The state the approving device vouched for: an older one is refused from now on.
        try manifests.seen.raise(
            account: SeenManifest.account(approval.accountKey), epoch: approval.epoch,
            version: approval.manifestVersion)
        try self.keys.adopt(approval.accountKey, since: read)
        return true
    }

    /// The join requests waiting in the cloud (their IDs: a request carries no code — the user
    /// reads it off the new device's screen).
    public func joinRequests() throws(DeviceError) -> [JoinRequest] {
        try JoinRequest.pending(on: try self.keys.signedIn()).map { JoinRequest(id: $0) }
    }

    /// Approves the join request whose device shows `code`, typed by the user: the one waiting
    /// request is answered with this device's share of the exchange keyed by the code and the
    /// account key with the account's state sealed under the exchange's key. Only a device that
    /// shows that code opens it: a request the cloud made gets one guess of the code (one chance
    /// in 10⁶) and learns nothing it could test a guess against. With more than one request
    /// waiting this device cannot tell the user's: it withdraws them all (so both sides stop) and
    /// approves nothing. Needs this device unlocked and holding the key.
    ///
    /// - Throws: `.interactionNotAllowed` when locked; `.invalidPasscode` without a six-digit
    ///   code, or with no request waiting; `.authFailed` with more than one (all withdrawn).
    public func approveJoin(code: String?) throws(DeviceError) {
        try JoinApprover(account: self).approve(code: code)
    }

    /// Replaces the recovery key: the account key is rotated (`rotateAccountKey`) and the new one
    /// sealed to a new recovery key (returned, to show once), so the old recovery key opens
    /// nothing written after. Needs this device unlocked and holding the account key.
    public func replaceRecoveryKey() throws(DeviceError) -> SecureBytes {
        try rotation.rotateAccountKey(removing: nil, replacingRecoveryKey: true)!
    }
}

/// A join request this device posted: the code it shows, and its side of the
/// password-authenticated exchange keyed by that code (what opens the approval).
public final class JoinTicket: Sendable {
    /// The request's random id (16 hex digits): it names the request's cloud objects
    /// (`join-<id>`), never the code.
    public let id: String
    /// The six digits to show; never sent anywhere.
    let code: String
    let secret: SecureBytes
    let share: Data
    /// Set when `awaitApproval` first runs: a ticket waits for one approval, once, so that a
    /// request is one guess of its code however its caller retries.
    let used = Mutex(false)

    init(id: String, code: String, secret: SecureBytes, share: Data) {
        self.id = id
        self.code = code
        self.secret = secret
        self.share = share
    }

    /// The first whole approval of this ticket before `deadline`, opened; nil when none came.
    func approval(on cloud: any CloudStorage, until deadline: ContinuousClock.Instant)
        throws(DeviceError) -> JoinApproval?
    {
        while true {
            // An approval that is not whole yet (a server still writing it, or bytes that are no
            // approval) is read again at the next poll; a whole one is this request's one answer.
            if let bytes = try cloud.checked.read(AccountObjects.joinApproval(id)),
                let record = JoinApprovalRecord.parse(bytes)
            {
                guard let approval = Self.open(record, self) else {
                    throw DeviceError(
                        .authFailed,
                        "the approval does not open under this device's code: the code typed on the approving device was another (a typo, or a device in the middle); nothing joined — start again"
                    )
                }
                return approval
            }
            if try cloud.checked.read(AccountObjects.joinRequest(id)) == nil {
                throw DeviceError(
                    .authFailed,
                    "this join request was withdrawn (by the approving device, which saw more than one waiting, or by the cloud); nothing joined — start again"
                )
            }
            if ContinuousClock.now >= deadline { return nil }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    /// The approval in `bytes`, when it opens under the key of `ticket`'s exchange.
    static func open(_ bytes: Data, _ ticket: JoinTicket) -> JoinApproval? {
        JoinApprovalRecord.parse(bytes).flatMap { open($0, ticket) }
    }

    /// The approval `record` holds, when it opens under the key of `ticket`'s exchange.
    static func open(_ record: JoinApprovalRecord, _ ticket: JoinTicket) -> JoinApproval? {
        guard
            let key = try? PasswordKeyExchange.key(
                secret: ticket.secret, peerShare: record.share, initiatorShare: ticket.share,
                responderShare: record.share, session: JoinCode.session(ticket.id)),
            let opened = try? Envelope.open(
                record.sealed, key: key,
                associatedData: JoinCode.approvalAssociatedData(
                    ticket.id, request: ticket.share, approver: record.share))
        else { return nil }
        return JoinApproval.parse(opened)
    }
}

/// A pending join request, as an approving device lists it.
public struct JoinRequest: Sendable, Hashable {
    /// The request's id (16 hex digits), as the requesting device's `JoinTicket` has it.
    public let id: String

    /// The IDs of the join requests in the cloud's listing.
    static func pending(on cloud: any CloudStorage) throws(DeviceError) -> [String] {
        try cloud.checked.list().compactMap { name -> String? in
            let id = String(name.dropFirst(5))
            return name.hasPrefix("join-") && id.count == 16 && id.allSatisfy(\.isHexDigit)
                ? id : nil
        }.sorted()
    }
}
