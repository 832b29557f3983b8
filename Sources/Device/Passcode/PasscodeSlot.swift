import Escrow
import Foundation
import Sealing
import TPM

/// What checking a device's passcode takes, as the device record keeps it: the derivation's salt
/// and cost, and where the passcode is checked — a verifier (software path), a slot at the guess
/// counter service (counted path) or a direct slot on a TPM (TPM path: records may hold one, new
/// lock screens never make one).
package struct PasscodeSlot: Codable, Sendable, Equatable {
    /// 1: verifier from Argon2id(passcode) alone (read, then rewritten as 2 at the next unlock);
    /// 2: verifier and KEK bound to the device secret.
    package var version: Int
    package var salt: Data?
    package var cost: Argon2Cost?
    /// Software path only: BLAKE2b keyed by the device secret over Argon2id(passcode).
    package var verifier: Data?
    /// TPM path: where the TPM keeps the passcode-released secret and its guess counter.
    package var tpm: TPMSlot?
    /// Counted path: the slot at the guess counter service, which releases the secret the KEK
    /// needs only to a proof of the passcode and counts every claim before it answers.
    package var counterSlot: Data?
    /// Counted path: who answered and the slot's key at registration (nil in an unpinned slot,
    /// which is registered again, pinned, at its next unlock).
    package var counterPin: CounterPin?
    /// Counter slots a passcode change replaced whose removal is not yet confirmed: removed (as
    /// their reader) before the next claim, so a change cut short never leaves the old
    /// passcode answering past the next unlock.
    package var retiredCounterSlots: [Data]?

    /// The slot's names in the device record's stored object.
    package enum CodingKeys: String, CodingKey, CaseIterable {
        case version, salt, cost, verifier, tpm, counterSlot, counterPin, retiredCounterSlots
    }

    package init(
        version: Int, salt: Data?, cost: Argon2Cost?, verifier: Data?, tpm: TPMSlot?,
        counterSlot: Data?, counterPin: CounterPin? = nil, retiredCounterSlots: [Data]? = nil
    ) {
        self.version = version
        self.salt = salt
        self.cost = cost
        self.verifier = verifier
        self.tpm = tpm
        self.counterSlot = counterSlot
        self.counterPin = counterPin
        self.retiredCounterSlots = retiredCounterSlots
    }

    /// No passcode: nothing to check it with.
    package static let empty = PasscodeSlot(
        version: 2, salt: nil, cost: nil, verifier: nil, tpm: nil, counterSlot: nil)

    /// Where this slot's guesses are counted, as `keepsake lockscreen status` names it.
    package var guessLimit: String {
        counterSlot != nil ? "service" : tpm != nil ? "tpm" : "software"
    }
}

/// The passcode slot's three paths: checking a passcode (only through `prove`, which counts it
/// first), making a slot for a new one, removing one no record names any more. Called holding
/// the device's lock (`DeviceRecordStore.exclusively`).
extension GuessLimit {
    /// The key-encryption key for `passcode` (and on the counted path what the counter
    /// released), or `.authFailed` when it is wrong. On the TPM path a right passcode rebases
    /// `slot` (its count starts again).
    func keyEncryptionKey(
        _ passcode: SecureBytes, slot: inout PasscodeSlot, deviceSecret: SecureBytes
    ) throws(DeviceError) -> (kek: SecureBytes, released: EscrowClient.Released?) {
        if let counterSlot = slot.counterSlot {
            guard let counter else {
                throw DeviceError(
                    .notAvailable,
                    "this device's passcode is held by a guess counter service, and none is configured (--counter URL)"
                )
            }
            retire(&slot, at: counter, deviceSecret: deviceSecret)
            let (passcodeKey, released) = try claim(
                counterSlot, passcode: passcode, slot: slot, at: counter,
                deviceSecret: deviceSecret)
            return (
                PasscodeKeys.counterKEK(
                    passcodeKey: passcodeKey, counterSecret: released.secret,
                    deviceSecret: deviceSecret),
                released
            )
        }
        guard let salt = slot.salt, let cost = slot.cost else {
            throw DeviceError(.corrupt, "no passcode parameters")
        }
        let passcodeKey = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: cost)
        if let tpmSlot = slot.tpm {
            guard let tpm else {
                throw DeviceError(
                    .notAvailable, "this device's passcode is held by a TPM, and none is reachable")
            }
            let auth = PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey)
            let tpmSecret: SecureBytes
            do throws(TPMError) {
                let result = try TPMPasscodeSlot.attempt(
                    try tpm.context(), slot: tpmSlot, authorization: auth)
                tpmSecret = result.secret
                slot.tpm = result.rebased
            } catch  where error.code == .authFailed {
                throw DeviceError(.authFailed, "wrong passcode", underlying: error)
            } catch  where error.code == .limitReached {
                throw DeviceError(
                    .disabled,
                    "\(Self.hardLimit) wrong passcodes in a row: the device is disabled (erase it: `Device.wipe`, `keepsake device wipe`)",
                    underlying: error)
            } catch {
                throw DeviceError(.notAvailable, "the TPM: \(error)", underlying: error)
            }
            return (
                PasscodeKeys.releasedSecretKEK(
                    passcodeKey: passcodeKey, releasedSecret: tpmSecret, deviceSecret: deviceSecret),
                nil
            )
        }
        let expected =
            slot.version < 2
            ? PasscodeKeys.version1Verifier(passcodeKey: passcodeKey)
            : PasscodeKeys.verifier(passcodeKey: passcodeKey, deviceSecret: deviceSecret)
        guard let verifier = slot.verifier, constantTimeEquals(expected, verifier) else {
            throw DeviceError(.authFailed, "wrong passcode")
        }
        return (PasscodeKeys.softwareKEK(passcodeKey: passcodeKey, deviceSecret: deviceSecret), nil)
    }

    /// One claim at the device's guess counter. Pinned (the record's pin checked first): the
    /// passcode key from the record's salt and cost, the socket's answer only from the pinned
    /// user, each evaluation proven under the pinned key — the service is asked nothing else.
    /// An unpinned slot (no `counterPin`): the salt, cost and key as the service names them (it
    /// is registered again, pinned, while the passcode is at hand: `needsPin`).
    private func claim(
        _ counterSlot: Data, passcode: SecureBytes, slot: PasscodeSlot,
        at counter: EscrowConfiguration, deviceSecret: SecureBytes
    ) throws(DeviceError) -> (passcodeKey: SecureBytes, released: EscrowClient.Released) {
        guard let pin = slot.counterPin else {
            // An unpinned slot: claimed as the service answers until it is pinned, and only on
            // its socket (another user can take a TCP port and answer with a key of its own).
            guard counter.socket != nil else {
                throw DeviceError(
                    .notAvailable,
                    "this device's guess counter slot is unpinned and its counter is on a TCP port, where it cannot be told from another user's process: install the counter (`scripts/install-guess-counter`), name it with --counter unix:/run/keepsake/counter.sock, and set the passcode again",
                    underlying: EscrowError(.notTheService, "a TCP guess counter"))
            }
            return try counter.claim(counterSlot, passcode: passcode) { error in
                counterFailure(error, counterSlot, slot: slot, at: counter, deviceSecret)
            }
        }
        guard let salt = slot.salt, let cost = slot.cost else {
            throw DeviceError(.corrupt, "no passcode parameters")
        }
        try pin.check(slot: counterSlot, salt: salt, cost: cost, deviceSecret: deviceSecret)
        let client = counter.client(peer: .user(pin.peer))
        let passcodeKey = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: cost)
        do {
            let released = try client.claim(
                counterSlot, passcodeKey: passcodeKey, publicKey: pin.publicKey)
            return (passcodeKey, released)
        } catch {
            throw counterFailure(error, counterSlot, slot: slot, at: counter, deviceSecret)
        }
    }

    /// A guess counter's refusal of a claim, as the device says it (the one place it is
    /// translated): a destroyed slot disables the device; a claim refused until a delay passes
    /// says when (the count is told only to this device's reader key); a wrong passcode; a
    /// counter without this slot, or not the service registered with; anything else as an
    /// unreachable counter.
    private func counterFailure(
        _ error: EscrowError, _ counterSlot: Data, slot: PasscodeSlot,
        at counter: EscrowConfiguration, _ deviceSecret: SecureBytes
    ) -> DeviceError {
        let place = counter.url.absoluteString
        let (code, message): (DeviceError.Code, String)
        switch error.code {
        case .destroyed:
            (code, message) = (
                .disabled,
                "\(Self.hardLimit) wrong passcodes: the guess counter destroyed this device's slot; the device is disabled (erase it: `Device.wipe`, `keepsake device wipe`)"
            )
        case .wait:
            // The counter tells when only to this device's reader key.
            let reader = EscrowProtocol.reader(secret: deviceSecret)
            let client = counter.client(
                peer: slot.counterPin.map { .user($0.peer) } ?? .anyOtherUser)
            let when = (try? client.count(of: counterSlot, reader: reader))?.count?.notBefore
            (code, message) = (
                .authFailed,
                "too many wrong passcodes lately: the guess counter takes the next one "
                    + (when.map { "after \(WrongPasscodes.time($0))" } ?? "later")
            )
        case .authFailed: (code, message) = (.authFailed, "wrong passcode")
        case .notFound:
            (code, message) = (
                .notAvailable,
                "the guess counter at \(place) holds no slot for this device (another counter, or its state was lost): the passcode cannot be checked"
            )
        case .notTheService:
            (code, message) = (
                .notAvailable,
                "the guess counter at \(place) is not the service this device registered with (\(error.message)): nothing derived from the passcode was sent; start the real one (`scripts/install-guess-counter`)"
            )
        default: return DeviceError(escrow: error)
        }
        return DeviceError(code, message, underlying: error)
    }

    /// Removes the slots a passcode change left behind (as their reader: no passcode needed),
    /// dropping each from `slot` once the counter confirms it gone. One the counter cannot
    /// reach now stays listed for the next attempt.
    private func retire(
        _ slot: inout PasscodeSlot, at counter: EscrowConfiguration, deviceSecret: SecureBytes
    ) {
        guard let retired = slot.retiredCounterSlots, !retired.isEmpty else { return }
        let client = counter.client(peer: slot.counterPin.map { .user($0.peer) } ?? .anyOtherUser)
        let reader = EscrowProtocol.reader(secret: deviceSecret)
        slot.retiredCounterSlots = retired.filter { old in
            do throws(EscrowError) {
                try client.remove(old, reader: reader)
                return false
            } catch {
                return ![.notFound, .destroyed].contains(error.code)
            }
        }
        if slot.retiredCounterSlots?.isEmpty == true { slot.retiredCounterSlots = nil }
    }

    /// Tells the counter the owner was shown `claim`'s report (best effort: one not told stays
    /// spent and is reported again at the next right claim).
    package func acknowledge(_ claim: CounterClaim?) {
        guard let claim, let counter else { return }
        try? counter.client(peer: claim.pin.map { .user($0.peer) } ?? .anyOtherUser)
            .acknowledge(claim.slot, claim.released)
    }

    /// Whether `slot` is an unpinned counter slot (no `counterPin`), at a counter on a socket: it
    /// is registered again, pinned, at the next unlock.
    package func needsPin(_ slot: PasscodeSlot) -> Bool {
        slot.counterSlot != nil && slot.counterPin == nil && counter?.socket != nil
    }

    /// A new slot for `passcode` (nil: no knowledge factor) at this device's cost, replacing
    /// `slot`'s fields: a new salt, and on a counted or TPM device a new slot (the old one stays
    /// until the caller removes it). `directSlot: false` keeps a new slot off the TPM. Returns the
    /// key-encryption key and, on the counted path, the new slot's secret (what removing it takes).
    package func makeSlot(
        for passcode: SecureBytes?, replacing slot: inout PasscodeSlot, deviceSecret: SecureBytes,
        directSlot: Bool = true, succeeding: (slot: Data, report: Data)? = nil
    ) throws(DeviceError) -> (kek: SecureBytes, counterSecret: SecureBytes?) {
        let previousTPMSlot = slot.tpm
        // A counter slot being replaced is listed as retired until its removal is confirmed.
        let retiring = (slot.retiredCounterSlots ?? []) + [slot.counterSlot].compactMap { $0 }
        slot = .empty
        if !retiring.isEmpty { slot.retiredCounterSlots = retiring }
        guard let passcode else { return (PasscodeKeys.deviceKEK(deviceSecret), nil) }
        let salt = KeyDerivation.randomBytes(KeyDerivation.saltLength)
        let passcodeKey = try PasscodeKeys.passcodeKey(passcode, salt: salt, cost: cost)
        slot.salt = salt
        slot.cost = cost
        if let counter {
            guard counter.socket != nil else {
                throw DeviceError(
                    .notAvailable,
                    "a guess counter is registered with only through its UNIX socket (--counter unix:/run/keepsake/counter.sock): on a TCP port any local user could answer for it and learn what tests a guess"
                )
            }
            let secret = SecureBytes(randomCount: 32)
            let cost = cost
            let seen = PeerSeen()
            let client = EscrowClient(transport: counter.transport(peer: .anyOtherUser, seen: seen))
            let reader = EscrowProtocol.reader(secret: deviceSecret).publicKey
            let registered: EscrowClient.Registered
            do {
                registered = try client.register(
                    secret, passcodeKey: passcodeKey, salt: salt, cost: cost,
                    limit: Int(Self.hardLimit), reader: reader, succeeding: succeeding)
            } catch { throw DeviceError(escrow: error) }
            guard let peer = seen.uid else {
                throw DeviceError(.notAvailable, "the guess counter's user is unknown")
            }
            slot.counterSlot = registered.slot
            slot.counterPin = CounterPin(
                peer: peer, publicKey: registered.publicKey, slot: registered.slot, salt: salt,
                cost: cost, deviceSecret: deviceSecret)
            return (
                PasscodeKeys.counterKEK(
                    passcodeKey: passcodeKey, counterSecret: secret, deviceSecret: deviceSecret),
                secret
            )
        }
        if directSlot, let tpm, tpm.newSlots == .made {
            let tpmSecret = SecureBytes(randomCount: 32)
            do {
                slot.tpm = try TPMPasscodeSlot.create(
                    try tpm.context(), counter: previousTPMSlot?.counterIndex,
                    authorization: PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey),
                    secret: tpmSecret, limit: Self.hardLimit)
            } catch { throw DeviceError(tpm: error) }
            return (
                PasscodeKeys.releasedSecretKEK(
                    passcodeKey: passcodeKey, releasedSecret: tpmSecret, deviceSecret: deviceSecret),
                nil
            )
        }
        slot.verifier = PasscodeKeys.verifier(passcodeKey: passcodeKey, deviceSecret: deviceSecret)
        return (PasscodeKeys.softwareKEK(passcodeKey: passcodeKey, deviceSecret: deviceSecret), nil)
    }

    /// Tries spent as the counter of `slot` has them, and where it keeps the count: the guess
    /// counter service's (as it says, to this device's reader key only) or the TPM's; `recorded`
    /// and nil on the software path, where the device record keeps the count.
    package func count(of slot: PasscodeSlot, recorded: Int, deviceSecret: SecureBytes)
        throws(DeviceError) -> (failures: Int, countedIn: String?)
    {
        if let counterSlot = slot.counterSlot, let counter {
            let client = counter.client(
                peer: slot.counterPin.map { .user($0.peer) } ?? .anyOtherUser)
            let reader = EscrowProtocol.reader(secret: deviceSecret)
            do {
                let status = try client.count(of: counterSlot, reader: reader)
                return (status.count?.spent ?? 0, status.counter)
            } catch { throw DeviceError(escrow: error) }
        }
        if let tpmSlot = slot.tpm, let tpm {
            do {
                let context = try tpm.context()
                let failures = try TPMPasscodeSlot.failures(context, slot: tpmSlot)
                return (Int(failures), context.kind(tcti: tpm.tcti))
            } catch { throw DeviceError(tpm: error) }
        }
        return (recorded, nil)
    }

    /// Refuses a new passcode on a device that names a TPM of its own and no guess counter
    /// service: it asked for a TPM's count, which a TPM that the user's processes reach does not
    /// give (see `TPMConfiguration`), and must not get the software path unawares. A device whose
    /// slot is already on the TPM moves to the software path at its next passcode change.
    package func refuseDirectTPM(_ slot: PasscodeSlot) throws(DeviceError) {
        guard counter == nil, let tpm, tpm.newSlots == .refused, slot.tpm == nil else { return }
        throw DeviceError(
            .notAvailable,
            "the TPM: a TPM that this user's processes reach cannot count their passcode guesses (any of them could disable the device or guess around the count); run `keepsake-escrow --tpm \(tpm.tcti)` as a user of its own and name it with `--counter URL` (`Device(counter:)`), or leave out `--tpm` for the software path (docs/running.md)"
        )
    }

    /// Whether `slot`, on the TPM, moves off it while the passcode is at hand: when the device
    /// names a guess counter service, or when the TPM's lockout authorization is empty (any
    /// process could clear the lockout that counts guesses made around Keepsake's counter).
    package func movesOffTPM(_ slot: PasscodeSlot) -> Bool {
        guard slot.tpm != nil else { return false }
        if counter != nil { return true }
        guard let tpm, let context = try? tpm.context() else { return false }
        return (try? context.lockoutAuthorizationIsSet()) == false
    }

    /// Removes what `old` holds that `current` no longer names: a direct TPM slot, or a counter
    /// slot (given the secret it released, what removing it takes). Best effort: a counter slot
    /// left behind holds a secret nothing uses, still counted.
    package func remove(_ old: PasscodeSlot, keeping current: PasscodeSlot, secret: SecureBytes?) {
        if let tpmSlot = old.tpm, tpmSlot != current.tpm, let tpm,
            let context = try? tpm.context()
        {
            TPMPasscodeSlot.destroy(context, slot: tpmSlot)
        }
        if let counterSlot = old.counterSlot, counterSlot != current.counterSlot, let secret,
            let counter
        {
            try? counter.client(peer: old.counterPin.map { .user($0.peer) } ?? .anyOtherUser)
                .remove(counterSlot, secret: secret)
        }
    }
}
