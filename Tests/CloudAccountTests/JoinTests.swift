import Escrow
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import TPM
import Testing

@testable import CloudAccount
@testable import Device

private func text(_ bytes: SecureBytes) -> String {
    bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
}

@Suite(
    "Joining a cloud account: approval, recovery key, escrow",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct JoinTests {
    @Test(
        "nothing in the cloud account can be tested against a passcode guess: no object holds anything derived from the passcode"
    )
    func nothingToGuessAgainst() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let change = try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        #expect(change.recoveryKey != nil)
        let names = Set(try CloudDirectory(cloud).list())
        #expect(
            names == [
                "account", "account-escrow", "account-manifest", "account-recovery",
                "account-witness",
            ])
        let escrowBytes = try #require(try CloudDirectory(cloud).read("account-escrow"))
        let escrow = try #require(EscrowRecord.parse(escrowBytes))
        // What a guess would have to be checked against: Argon2id of the passcode (salted as the
        // escrow keeps it), and the TPM authorization derived from it. Neither is anywhere in the
        // cloud, and neither opens the recovery object.
        let slot = try PrivateEscrow.of(cloud).configuration.client().status(of: escrow.slot)
        let passcodeKey = try PasscodeKeys.passcodeKey("4711", salt: slot.salt, cost: slot.cost)
        let derived = [
            passcodeKey.unsafeData(),
            PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey).unsafeData(),
        ]
        for name in names {
            let bytes = try #require(try CloudDirectory(cloud).read(name))
            for value in derived {
                for start in stride(from: 0, to: value.count - 8, by: 4) {
                    #expect(bytes.range(of: value[start..<(start + 8)]) == nil, "\(name)")
                }
            }
        }
        // The recovery record is sealed to the recovery key's X25519 key: a key pair grown from
        // anything passcode-derived does not open it.
        let sealed = try #require(try CloudDirectory(cloud).read("account-recovery"))
        for key in [passcodeKey, PasscodeKeys.tpmAuthorization(passcodeKey: passcodeKey)] {
            let pair = SealedBox.keyPair(seed: key)
            #expect(throws: (any Error).self) {
                try SealedBox.open(sealed, publicKey: pair.publicKey, secretKey: pair.secretKey)
            }
        }
    }

    @Test(
        "by approval: the new device posts a request and shows a code of its own, the user types it on the unlocked device, the new device holds the key"
    )
    func approval() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        try tablet.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
        let ticket = try tablet.requestJoin()
        // The code is the new device's from the start, and nowhere in the cloud.
        let shown = try #require(
            try tablet.awaitCode(of: ticket, timeout: .milliseconds(1)))
        #expect(shown.count == 6 && shown.allSatisfy(\.isASCII) && shown.allSatisfy(\.isNumber))
        #expect(try phone.joinRequests().map(\.id) == [ticket.id])
        let posted = try CloudDirectory(cloud).read(AccountObjects.joinRequest(ticket.id)) ?? Data()
        #expect(posted.range(of: Data(shown.utf8)) == nil)
        // No code approves nothing; a locked phone approves nothing.
        #expect(code { try phone.approveJoin(code: nil) } == .invalidPasscode)
        try phone.device.lock()
        #expect(code { try phone.approveJoin(code: shown) } == .interactionNotAllowed)
        // No approval in time: the request is withdrawn; the new device starts again.
        #expect(
            try tablet.awaitApproval(of: ticket, timeout: .milliseconds(300)) == false
        )
        #expect(try phone.joinRequests().isEmpty)
        try phone.unlock(passcode: "4711")
        let again = try tablet.requestJoin()
        let shownAgain = try #require(try tablet.awaitCode(of: again, timeout: .zero))
        try phone.approveJoin(code: shownAgain)
        #expect(try tablet.awaitApproval(of: again, timeout: .seconds(5)))
        let phoneKey = try #require(try phone.keys.cloudKey())
        let tabletKey = try #require(try tablet.keys.cloudKey())
        #expect(phoneKey == tabletKey)
        // The request and its approval are gone from the cloud.
        #expect(try CloudDirectory(cloud).list().filter { $0.hasPrefix("join-") }.isEmpty)
    }

    @Test(
        "with the recovery key: shown once at creation, it joins a new device; a replaced one does not"
    )
    func recoveryKey() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        let first = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        #expect(
            text(first).range(of: #"^([A-Z2-7]{4}-){7}[A-Z2-7]{4}$"#, options: .regularExpression)
                != nil)
        // Shown once: a later change does not show it again.
        #expect(
            try phone.setLockScreen(.pin, passcode: "1357", currentPasscode: "4711").recoveryKey
                == nil)
        let (laptopService, laptop) = try member(cloud)
        defer { withExtendedLifetime(laptopService) {} }
        try laptop.join(recoveryKey: first)
        #expect(
            try laptop.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
        let second = try phone.replaceRecoveryKey()
        #expect(text(second) != text(first))
        let (desktopService, desktop) = try member(cloud)
        defer { withExtendedLifetime(desktopService) {} }
        #expect(code { try desktop.join(recoveryKey: first) } == .authFailed)
        try desktop.join(recoveryKey: second)
        #expect(
            try desktop.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
    }

    @Test("with the escrow: the right passcode joins; a changed passcode is registered again")
    func escrowJoin() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        #expect(code { try tablet.join(passcode: "0000") } == .authFailed)
        try tablet.join(passcode: "4711")
        #expect(
            try tablet.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
        try phone.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        try expectEscrowAnswersOnly("8642", not: "4711", on: cloud)
    }

    @Test(
        "with the escrow: wrong passcode claims by a joining device reach the owner's devices (read at unlock with the account's reader key), a right join reports and acknowledges them, and a passcode change keeps them counted against the account"
    )
    func escrowWrongClaimsReachTheOwner() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        #expect(phone.escrowWrongClaims() == nil)
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        for guess in ["0000", "0001", "0002"] {
            #expect(
                code { try tablet.join(passcode: SecureBytes(copying: Data(guess.utf8))) }
                    == .authFailed)
        }
        let notice = try #require(phone.escrowWrongClaims())
        #expect(notice.count == 3 && notice.atAccountEscrow)
        #expect(notice.notice.hasPrefix("3 wrong passcode claims at the account's escrow since 20"))
        try phone.device.reboot()
        #expect(try phone.unlockReporting(passcode: "4711").escrowWrongClaims?.count == 3)
        // A passcode change registers a new slot in the same budget: still 3.
        try phone.setLockScreen(.pin, passcode: "8642", currentPasscode: "4711")
        #expect(phone.escrowWrongClaims()?.count == 3)
        // The right join reports them, and only then are they given back.
        let joined = try tablet.joinReporting(passcode: "8642")
        #expect(joined.wrongPasscodes?.count == 3 && joined.wrongPasscodes?.atAccountEscrow == true)
        #expect(phone.escrowWrongClaims() == nil)
    }

    @Test(
        "with the escrow's real delays: after 5 wrong claims a join is refused saying until when, and naming approval and the recovery key"
    )
    func escrowRefusalSaysWhatIsLeft() throws {
        let escrow = try PrivateEscrow(delays: true)
        let cloud = CloudDirectory(Throwaway.untrusted("cloud"))
        let phoneService = try PrivateSecretService.start()
        let phone = phoneService.account(
            directory: Throwaway.directory("phone"), cloud: cloud, escrow: escrow.configuration,
            tuning: .fast)
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let tabletService = try PrivateSecretService.start()
        let tablet = tabletService.account(
            directory: Throwaway.directory("tablet"), cloud: cloud, escrow: escrow.configuration,
            tuning: .fast)
        for guess in ["0000", "0001", "0002", "0003", "0004"] {
            #expect(
                code { try tablet.join(passcode: SecureBytes(copying: Data(guess.utf8))) }
                    == .authFailed)
        }
        do {
            try tablet.join(passcode: "4711")
            Issue.record("a claim within the delay was taken")
        } catch {
            #expect(error.code == .authFailed)
            #expect(error.message.contains("the next claim is taken after 20"), "\(error.message)")
            #expect(error.message.contains("device join --approval"))
            #expect(error.message.contains("device join --recovery-key"))
        }
        #expect(phone.escrowWrongClaims()?.count == 5)
    }

    @Test(
        "with the escrow: 10 wrong passcode claims from two devices together destroy the escrow record for good; the right passcode then fails too"
    )
    func escrowLimit() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let (oneService, one) = try member(cloud)
        defer { withExtendedLifetime(oneService) {} }
        let (twoService, two) = try member(cloud)
        defer { withExtendedLifetime(twoService) {} }
        for guess in 0..<10 {
            let device = guess.isMultiple(of: 2) ? one : two
            // The 10th wrong claim destroys the slot at once (its key erased): it says so.
            #expect(
                code {
                    try device.join(
                        passcode: SecureBytes(copying: Data("000\(guess)".utf8)))
                }
                    == (guess < 9 ? .authFailed : .notAvailable))
        }
        #expect(code { try one.join(passcode: "4711") } == .notAvailable)
        #expect(try CloudDirectory(cloud).read("account-escrow") == nil)
        #expect(code { try two.join(passcode: "4711") } == .notAvailable)
        print("escrow: 10 wrong claims from two devices, then the record is destroyed for good")
    }

    @Test(
        "an empty, too short or non-UTF-8 passcode is never a guess: unlock, a lock-screen change and a join through the escrow each answer invalidPasscode before anything is counted"
    )
    func impossiblePasscodesAreNeverGuesses() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        try phone.device.reboot()
        let (tabletService, tablet) = try member(cloud)
        defer { withExtendedLifetime(tabletService) {} }
        let impossible = [
            Data(), Data("1".utf8), Data("471".utf8), Data([0x34, 0xFF, 0x37, 0x31]),
        ]
        // More than the escrow's 10 claims and the device's limit, had any been counted.
        for _ in 0..<3 {
            for bytes in impossible {
                let guess = SecureBytes(copying: bytes)
                #expect(code { try tablet.join(passcode: guess) } == .invalidPasscode)
                #expect(code { try phone.unlock(passcode: guess) } == .invalidPasscode)
                #expect(
                    code {
                        try phone.setLockScreen(.pin, passcode: "1357", currentPasscode: guess)
                    } == .invalidPasscode)
            }
        }
        #expect(try phone.device.status().failedAttempts == 0)
        #expect(try CloudDirectory(cloud).read("account-escrow") != nil)
        try tablet.join(passcode: "4711")
        try phone.unlock(passcode: "4711")
    }

    @Test(
        "without an escrow, joining with a passcode answers a clear error naming the other two ways"
    )
    func noEscrow() throws {
        let cloud = Throwaway.untrusted("cloud")
        let (phoneService, phone) = try member(cloud)
        defer { withExtendedLifetime(phoneService) {} }
        try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
        let service = try PrivateSecretService.start()
        defer { withExtendedLifetime(service) {} }
        let plain = service.account("plain", cloud: CloudDirectory(cloud), tuning: .fast)
        do {
            try plain.join(passcode: "4711")
            Issue.record("joined without an escrow")
        } catch {
            #expect(error.code == .notAvailable)
            #expect(error.message.contains("approval") && error.message.contains("recovery key"))
        }
    }
}

@Suite(
    "The cloud account's escrow record",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct EscrowRecordTests {
    @Test(
        "the cloud only names the escrow slot: a record that does not decode is refused as corrupt, one naming a slot the escrow does not hold answers notAvailable; neither spends a claim",
        arguments: ["garbage", "other-slot"])
    func hostileRecord(_ kind: String) throws {
        let cloud = Throwaway.untrusted("cloud")
        let service = try PrivateSecretService.start()
        let owner = service.account("owner", cloud: cloud)
        try owner.setLockScreen(.pin, passcode: "1234", currentPasscode: nil)
        let file = cloud.appendingPathComponent("account-escrow")
        let real = try #require(EscrowRecord.parse(try Data(contentsOf: file)))
        // Whoever holds the cloud directory rewrites the record.
        let hostile =
            kind == "garbage"
            ? Data("KES2{\"version\":2,\"slot\":\"AAAA\"}".utf8)
            : EscrowRecord(slot: Data(repeating: 7, count: 16)).encoded()
        try hostile.write(to: file)
        let other = try PrivateSecretService.start()
        let newcomer = other.account("newcomer", cloud: cloud)
        #expect(
            codeOrUnavailable { try newcomer.join(passcode: "1234") }
                == (kind == "garbage" ? .corrupt : .notAvailable))
        // The real slot's count is untouched.
        let client = try PrivateEscrow.of(cloud).configuration.client()
        let accountKey = try #require(try owner.keys.cloudKey(forUpload: false))
        let status = try client.count(
            of: real.slot, reader: EscrowProtocol.reader(secret: accountKey))
        #expect(status.count?.spent == 0)
    }
}
