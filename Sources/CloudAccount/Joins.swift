import Escrow
import Device
import Foundation
import Sealing
import Synchronization

/// Joining the cloud account: with the recovery key, with the passcode (through the account's
/// escrow, which counts the claims), or by the approval of a device already in it.
extension Device {
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
    /// - Returns: what to tell the user when nothing vouched that the cloud shows the account's
    ///   latest state (nil when the escrow's witness did).
    @discardableResult
    public func join(passcode: SecureBytes) throws(DeviceError) -> String? {
        let cloud = try signedIn()
        guard let escrow else {
            throw DeviceError(
                .notAvailable,
                "joining with a passcode needs the account's escrow (--escrow URL); join by approval of an existing device (device join --approval) or with the recovery key (device join --recovery-key)"
            )
        }
        try LockScreenKind.checkGuess(passcode)  // never a claim: refused before the escrow
        guard let found = try cloudCall({ try cloud.read(AccountObjects.escrow) }) else {
            throw DeviceError(
                .notAvailable,
                "the cloud account has no escrow record (none registered, or destroyed after 10 wrong passcodes): join by approval or with the recovery key"
            )
        }
        guard let record = EscrowRecord.parse(found) else {
            throw DeviceError(.corrupt, "the cloud account's escrow record does not decode")
        }
        let released: (key: SecureBytes, seed: SecureBytes?)
        do throws(DeviceError) {
            released = AccountWitness.split(
                escrowSecret: try escrow.claim(record.slot, passcode: passcode).secret)
        } catch {
            if (error.underlying as? EscrowError)?.code == .destroyed {
                try? cloud.delete(AccountObjects.escrow)  // it names nothing any more
            }
            throw error
        }
        let account = try checkAccount(released.key)
        let note = try checkWitness(released.key, seed: released.seed, account: account)
        try adopt(released.key, witnessSeed: released.seed)
        return note
    }

    /// Joins with the recovery key shown when the account was created (or last replaced).
    ///
    /// - Throws: `.authFailed` for a key that is not the account's; `.invalidPasscode` for text
    ///   that is not a recovery key; `.corrupt` when the cloud shows an older account state than
    ///   the escrow's witness keeps, or an account the witness does not know (planted).
    /// - Returns: what to tell the user when nothing vouched that the cloud shows the account's
    ///   latest state (nil when the escrow's witness did).
    @discardableResult
    public func join(recoveryKey text: SecureBytes) throws(DeviceError) -> String? {
        let cloud = try signedIn()
        guard let key = RecoveryKey.parse(text) else {
            throw DeviceError(.invalidPasscode, "a recovery key is 32 base32 characters")
        }
        guard let sealed = try cloudCall({ try cloud.read(AccountObjects.recovery) }) else {
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
        let account = try checkAccount(accountKey)
        let seed = AccountWitness.seed(recoveryKey: key)
        let note = try checkWitness(accountKey, seed: seed, account: account)
        try adopt(accountKey, witnessSeed: seed)
        return note
    }

    /// A join request this device posted, and what it needs to show its code and open the
    /// approval: its X25519 key pair, its nonce (revealed once the approving device answered), and
    /// the approving device's key its code was computed with.
    public final class JoinTicket: Sendable {
        public let id: String
        let publicKey: Data
        let secretKey: SecureBytes
        let nonce: Data
        /// The approving device's key and nonce, as this device saw them when it showed its code.
        let answered = Mutex<JoinChallengeRecord?>(nil)

        init(id: String, publicKey: Data, secretKey: SecureBytes, nonce: Data) {
            self.id = id
            self.publicKey = publicKey
            self.secretKey = secretKey
            self.nonce = nonce
        }
    }

    /// Posts a join request: a new X25519 key pair and a commitment to a random nonce. The code
    /// to show comes once an existing device answered (`awaitCode`).
    public func requestJoin() throws(DeviceError) -> JoinTicket {
        let cloud = try signedIn()
        let (publicKey, secretKey) = SealedBox.keyPair()
        let nonce = KeyDerivation.randomBytes(32)
        let id = KeyDerivation.randomBytes(8).hexString
        let request = JoinRequestRecord(
            publicKey: publicKey,
            commitment: JoinCode.commitment(publicKey: publicKey, nonce: nonce))
        // A new name (64 random bits), made only where there is none.
        try swap(
            AccountObjects.joinRequest(id), request.encoded(), ifVersion: nil, on: cloud,
            conflict: "post the join request again")
        return JoinTicket(id: id, publicKey: publicKey, secretKey: secretKey, nonce: nonce)
    }

    /// Waits up to `timeout` for an existing device to answer `ticket` (`joinRequests` or
    /// `approveJoin` there), then reveals this device's nonce and returns the six-digit code to
    /// show: the user types it on the approving device. nil when no device answered in time.
    public func awaitCode(of ticket: JoinTicket, timeout: Duration) throws(DeviceError) -> String? {
        let cloud = try signedIn()
        let deadline = ContinuousClock.now + timeout
        if let known = ticket.answered.withLock({ $0 }) { return code(ticket, known) }
        while true {
            if let bytes = try cloudCall({ try cloud.read(AccountObjects.joinChallenge(ticket.id)) }
            ) {
                guard let challenge = JoinChallengeRecord.parse(bytes) else {
                    throw DeviceError(.corrupt, "the answer to this join request does not decode")
                }
                ticket.answered.withLock { $0 = challenge }
                _ = try cloudCall {
                    try cloud.write(
                        AccountObjects.joinReveal(ticket.id),
                        JoinRevealRecord(nonce: ticket.nonce).encoded(), ifVersion: nil)
                }
                return code(ticket, challenge)
            }
            if ContinuousClock.now >= deadline { return nil }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    private func code(_ ticket: JoinTicket, _ challenge: JoinChallengeRecord) -> String {
        JoinCode.of(
            joiner: ticket.publicKey, joinerNonce: ticket.nonce, approver: challenge.publicKey,
            approverNonce: challenge.nonce)
    }

    /// Waits up to `timeout` for an approval of `ticket` (after `awaitCode`); true once joined.
    /// The approval must come from the key the code was computed with; it vouches for the
    /// account's state, so a cloud that shows this device an older one is refused from then on.
    ///
    /// - Throws: `.authFailed` when the approving device withdrew the request (the codes did not
    ///   match: a device in the middle, or a typo); `.corrupt` for an approval that does not open
    ///   as the approving device's.
    public func awaitApproval(of ticket: JoinTicket, timeout: Duration) throws(DeviceError) -> Bool
    {
        let cloud = try signedIn()
        let deadline = ContinuousClock.now + timeout
        guard let challenge = ticket.answered.withLock({ $0 }) else {
            throw DeviceError(
                .interactionNotAllowed, "no code was shown yet for this join request (awaitCode)")
        }
        while true {
            if let boxed = try cloudCall({ try cloud.read(AccountObjects.joinApproval(ticket.id)) })
            {
                let approval: JoinApproval
                do {
                    let opened = try SealedBox.unbox(
                        boxed, from: challenge.publicKey, secretKey: ticket.secretKey)
                    guard let parsed = JoinApproval.parse(opened) else {
                        throw SealingError(.malformed, "not an approval")
                    }
                    approval = parsed
                } catch {
                    throw DeviceError(
                        .corrupt,
                        "the approval does not open as from the device that answered this request: nothing joined",
                        underlying: error)
                }
                try adopt(approval.accountKey)
                // The state the approving device vouched for: an older one is refused from now on.
                try seenManifest.raise(
                    account: SeenManifest.account(approval.accountKey), epoch: approval.epoch,
                    version: approval.manifestVersion)
                for name in AccountObjects.joinObjects(ticket.id) { try? cloud.delete(name) }
                return true
            }
            if try cloudCall({ try cloud.read(AccountObjects.joinRequest(ticket.id)) }) == nil {
                throw DeviceError(
                    .authFailed,
                    "the approving device withdrew this join request: the code typed there did not match this device's (a device in the middle, or a typo); nothing joined — start again"
                )
            }
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    /// A pending join request, as an approving device shows it.
    public struct JoinRequest: Sendable, Hashable {
        public let id: String
        /// The code this device computes for it, once the new device revealed its nonce; nil
        /// while it has not (or when its reveal does not match its commitment, or another device
        /// answered it).
        public let code: String?
    }

    /// The join requests waiting in the cloud (malformed ones skipped), answered by this device
    /// where no device has answered yet — so the new device can show its code.
    ///
    /// More than `maximumPendingJoins` requests are not read or answered (their codes are nil):
    /// each answer is one more code a cloud in the middle could hold ready for the one the user
    /// types, and each costs round trips.
    public func joinRequests() throws(DeviceError) -> [JoinRequest] {
        let cloud = try signedIn()
        let record = try records.load().record
        let ids = try cloudCall({ try cloud.list() }).compactMap { name -> String? in
            let id = String(name.dropFirst(5))
            return name.hasPrefix("join-") && id.count == 16 && id.allSatisfy(\.isHexDigit)
                ? id : nil
        }.sorted()
        guard ids.count <= Self.maximumPendingJoins else {
            return ids.map { JoinRequest(id: $0, code: nil) }
        }
        var requests: [JoinRequest] = []
        for id in ids {
            guard let bytes = try? cloud.read(AccountObjects.joinRequest(id)),
                let request = JoinRequestRecord.parse(bytes)
            else { continue }
            requests.append(
                JoinRequest(id: id, code: try answer(request, id: id, record: record, on: cloud)))
        }
        return requests
    }

    /// How many join requests may wait at once for this device to answer or approve any.
    static let maximumPendingJoins = 8

    /// This device's answer to join request `id` as it stands: a key pair and a nonce derived from
    /// the device secret, the id and the request's key and commitment. Nothing needs keeping
    /// between answering and approving, and none of it is the cloud's to choose: a challenge the
    /// cloud rewrote (another nonce under this device's key) or a request it changed after the
    /// answer (another commitment) no longer matches, so shows no code.
    private static func approverAnswer(
        _ record: DeviceRecord, request id: String, _ request: JoinRequestRecord
    ) -> (publicKey: Data, secretKey: SecureBytes, nonce: Data) {
        let seed = KeyDerivation.keyedHash(
            key: SecureBytes(copying: record.deviceSecret), context: "keepsake.join.approver.v3",
            Data(id.utf8) + request.publicKey + request.commitment)
        let pair = SealedBox.keyPair(seed: seed)
        let nonce = KeyDerivation.keyedHash(key: seed, context: "keepsake.join.approver-nonce.v3")
        return (pair.publicKey, pair.secretKey, nonce.unsafeData())
    }

    /// Answers `request` when nobody has; its code once the new device revealed a nonce that
    /// matches its commitment (nil otherwise, when another device answered, or when the answer
    /// there is not exactly this device's for this request).
    private func answer(
        _ request: JoinRequestRecord, id: String, record: DeviceRecord, on cloud: any CloudStorage
    ) throws(DeviceError) -> String? {
        let mine = Self.approverAnswer(record, request: id, request)
        var challenge = try cloudCall { try cloud.read(AccountObjects.joinChallenge(id)) }
            .flatMap(JoinChallengeRecord.parse)
        if challenge == nil {
            let made = JoinChallengeRecord(publicKey: mine.publicKey, nonce: mine.nonce)
            _ = try cloudCall {
                try cloud.write(AccountObjects.joinChallenge(id), made.encoded(), ifVersion: nil)
            }
            challenge = try cloudCall { try cloud.read(AccountObjects.joinChallenge(id)) }
                .flatMap(JoinChallengeRecord.parse)
        }
        guard let challenge, challenge.publicKey == mine.publicKey, challenge.nonce == mine.nonce,
            let reveal = try cloudCall({ try cloud.read(AccountObjects.joinReveal(id)) })
                .flatMap(JoinRevealRecord.parse),
            constantTimeEquals(
                JoinCode.commitment(publicKey: request.publicKey, nonce: reveal.nonce),
                request.commitment)
        else { return nil }
        return JoinCode.of(
            joiner: request.publicKey, joinerNonce: reveal.nonce, approver: challenge.publicKey,
            approverNonce: challenge.nonce)
    }

    /// Approves the join request whose code is `code` — the code the new device shows, typed by
    /// the user: the account key and the account's state, boxed from this device's key for the
    /// join to the new device's. Needs this device unlocked and holding the key. A code that
    /// matches no request withdraws the requests it was meant for (both sides stop: a device in
    /// the middle wins with one chance in a million, and is noticed when it loses).
    ///
    /// - Throws: `.interactionNotAllowed` when locked; `.invalidPasscode` without a code, or when
    ///   no request shows one yet; `.authFailed` when the code matches no request (withdrawn).
    public func approveJoin(code: String?) throws(DeviceError) {
        let cloud = try signedIn()
        guard let code, code.count == 6, code.allSatisfy(\.isASCII), code.allSatisfy(\.isNumber)
        else {
            throw DeviceError(
                .invalidPasscode, "type the six-digit code the new device shows (--code C)")
        }
        guard try state() == .unlocked, let accountKey = try cloudKey() else {
            throw DeviceError(
                .interactionNotAllowed, "approving needs this device unlocked and in the account")
        }
        let pending = try joinRequests()
        guard pending.count <= Self.maximumPendingJoins else {
            throw DeviceError(
                .invalidPasscode,
                "\(pending.count) join requests are pending (more than 8: some are not the user's); nothing approved"
            )
        }
        let shown = pending.filter { $0.code != nil }
        let chosen = shown.filter { $0.code == code }
        guard chosen.count == 1, let request = chosen.first else {
            if shown.isEmpty {
                throw DeviceError(
                    .invalidPasscode,
                    "no join request shows a code yet: the new device shows it once this device has answered (now): type it then"
                )
            }
            // The code the user saw is on no request here: whatever this device was shown is not
            // the device in the user's hand. Withdrawn, so both sides stop.
            for request in shown {
                for name in AccountObjects.joinObjects(request.id) { try? cloud.delete(name) }
            }
            throw DeviceError(
                .authFailed,
                "the code matches no join request: nothing approved, and the pending requests are withdrawn (a device in the middle, or a typo): start the join again"
            )
        }
        let record = try records.load().record
        guard let bytes = try cloudCall({ try cloud.read(AccountObjects.joinRequest(request.id)) }),
            let joiner = JoinRequestRecord.parse(bytes),
            try answer(joiner, id: request.id, record: record, on: cloud) == code
        else { throw DeviceError(.corrupt, "the join request changed meanwhile: nothing approved") }
        // The state this device itself has seen (its own file, or its key's epoch): never the
        // cloud's account record, whose epoch the cloud could lower to void the vouching.
        let seen = seenManifest.read(account: SeenManifest.account(accountKey))
        let approval = JoinApproval(
            accountKey: accountKey, epoch: seen?.epoch ?? record.cloudEpoch ?? 0,
            manifestVersion: seen?.version ?? 0)
        let boxed: Data
        do {
            boxed = try SealedBox.box(
                approval.encoded(), to: joiner.publicKey,
                from: Self.approverAnswer(record, request: request.id, joiner).secretKey)
        } catch {
            throw DeviceError(.corrupt, "\(error)", underlying: error)
        }
        // Made only where there is none.
        _ = try cloudCall {
            try cloud.write(AccountObjects.joinApproval(request.id), boxed, ifVersion: nil)
        }
    }

    /// Replaces the recovery key: the account key is rotated (`rotateAccountKey`) and the new one
    /// sealed to a new recovery key (returned, to show once), so the old recovery key opens
    /// nothing written after. Needs this device unlocked and holding the account key.
    public func replaceRecoveryKey() throws(DeviceError) -> SecureBytes {
        try rotateAccountKey(removing: nil, replacingRecoveryKey: true)!
    }
}
