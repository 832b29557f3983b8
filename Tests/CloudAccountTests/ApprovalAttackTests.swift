import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Synchronization
import Testing

@testable import CloudAccount
@testable import Device

/// A phone with a pin that made the account on a directory cloud, and a tablet with a pin of its
/// own signed in to it (not yet joined).
private func phoneAndTablet() throws -> (
    cloud: URL, phone: CloudAccount, tablet: CloudAccount, keep: [PrivateSecretService]
) {
    let cloud = Throwaway.untrusted("cloud")
    let (phoneService, phone) = try member(cloud)
    try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil)
    let (tabletService, tablet) = try member(cloud)
    try tablet.setLockScreen(.pin, passcode: "2580", currentPasscode: nil)
    return (cloud, phone, tablet, [phoneService, tabletService])
}

/// A cloud object's bytes (empty when it is missing).
private func object(_ name: String, in cloud: URL) throws -> Data {
    try CloudDirectory(cloud).read(name) ?? Data()
}

private func write(_ record: Data, _ name: String, in cloud: URL) throws {
    try record.write(to: cloud.appendingPathComponent(name))
}

/// What the cloud makes of a join request `id` when it guesses `guess`: its share of the exchange
/// and its secret.
private func cloudShare(_ guess: String, id: String) -> (secret: SecureBytes, share: Data) {
    PasswordKeyExchange.share(
        password: SecureBytes(copying: Data(guess.utf8)), session: JoinCode.session(id))
}

/// A code other than `code`.
private func another(_ code: String) -> String { code == "000000" ? "000001" : "000000" }

/// The approval of request `id` in the cloud, opened with the secret of the request's share.
private func openApproval(
    _ id: String, secret: SecureBytes, share: Data, in cloud: URL
) throws -> JoinApproval? {
    let ticket = JoinTicket(id: id, code: "", secret: secret, share: share)
    return JoinTicket.open(try object(AccountObjects.joinApproval(id), in: cloud), ticket)
}

@Suite(
    "Approval joins against a hostile cloud: a code only the new device shows, one guess a request",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct ApprovalAttackTests {
    @Test(
        "a cloud that answers the new device itself — its own share for a guessed code, an account key of its own sealed under that exchange — makes it join nothing: the first approval that does not open ends the request, so the cloud gets one guess"
    )
    func cloudAnswersTheNewDevice() throws {
        let (cloud, _, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        let shown = try #require(
            try tablet.awaitCode(of: ticket, timeout: .seconds(1)))
        let request = try #require(
            JoinRequestRecord.parse(try object(AccountObjects.joinRequest(ticket.id), in: cloud)))
        let mallory = cloudShare(another(shown), id: ticket.id)
        let key = try PasswordKeyExchange.key(
            secret: mallory.secret, peerShare: request.share, initiatorShare: request.share,
            responderShare: mallory.share, session: JoinCode.session(ticket.id))
        let planted = JoinApproval(
            accountKey: SecureBytes(randomCount: 32), epoch: 0, manifestVersion: 0
        ).encoded()
        let sealed = planted.withUnsafeBytes {
            Envelope.seal(
                $0, key: key,
                associatedData: JoinCode.approvalAssociatedData(
                    ticket.id, request: request.share, approver: mallory.share))
        }
        try write(
            JoinApprovalRecord(share: mallory.share, sealed: sealed).encoded(),
            AccountObjects.joinApproval(ticket.id), in: cloud)
        #expect(
            code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(30)) }
                == .authFailed)
        #expect(try tablet.keys.cloudKey(forUpload: false) == nil)
        // The request is gone: a second guess written after it is never tried.
        #expect(
            try CloudDirectory(cloud).list().filter { $0.hasPrefix("join-\(ticket.id)") }.isEmpty)
        try write(
            JoinApprovalRecord(share: mallory.share, sealed: sealed).encoded(),
            AccountObjects.joinApproval(ticket.id), in: cloud)
        #expect(
            code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(5)) }
                == .authFailed)
        #expect(try tablet.keys.cloudKey(forUpload: false) == nil)
    }

    @Test(
        "a request the cloud made in place of the new device's gets one guess of the code the user types: its approval opens only when it guessed that code, and the code typed again is answered no more, even with the approval cleared"
    )
    func cloudAsNewDevice() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        // A wrong guess, then the right one (the chance in 10⁶ it has per request, taken here to
        // show the exchange is what decides), each in place of a request of the tablet's that
        // the cloud hides.
        for guessesRight in [false, true] {
            let ticket = try tablet.requestJoin()
            let shown = try #require(
                try tablet.awaitCode(of: ticket, timeout: .seconds(1)))
            try CloudDirectory(cloud).delete(AccountObjects.joinRequest(ticket.id))
            let id = KeyDerivation.randomBytes(8).hexString
            let mallory = cloudShare(guessesRight ? shown : another(shown), id: id)
            try write(
                JoinRequestRecord(share: mallory.share).encoded(), AccountObjects.joinRequest(id),
                in: cloud)
            try phone.approveJoin(code: shown)
            let answered = try #require(
                try CloudDirectory(cloud).read(AccountObjects.joinApproval(id)))
            // The code typed again, the cloud having cleared its approval and posted its request
            // anew: a code is answered once, whatever the cloud lists.
            try CloudDirectory(cloud).delete(AccountObjects.joinApproval(id))
            #expect(code { try phone.approveJoin(code: shown) } == .authFailed)
            #expect(try CloudDirectory(cloud).read(AccountObjects.joinApproval(id)) == nil)
            try write(answered, AccountObjects.joinApproval(id), in: cloud)
            let opened = try openApproval(
                id, secret: mallory.secret, share: mallory.share, in: cloud)
            if guessesRight {
                #expect(opened?.accountKey == (try phone.keys.cloudKey()))
            } else {
                #expect(opened == nil)
            }
            try CloudDirectory(cloud).delete(AccountObjects.joinRequest(id))
            try CloudDirectory(cloud).delete(AccountObjects.joinApproval(id))
        }
    }

    @Test(
        "a code typed wrong on the approving device opens nothing and ends the request: the new device stops; started again, with a new code, it joins"
    )
    func typedWrong() throws {
        let (_, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        let shown = try #require(
            try tablet.awaitCode(of: ticket, timeout: .seconds(1)))
        try phone.approveJoin(code: another(shown))
        #expect(
            code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(5)) }
                == .authFailed)
        #expect(try phone.joinRequests().isEmpty)
        try phone.approve(tablet)
        #expect(
            try tablet.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
    }

    @Test(
        "an approval not yet whole (a server still writing it, as wsgidav does in place) is read again at the next poll, not taken as the request's one answer"
    )
    func approvalWrittenInPlace() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        let shown = try #require(try tablet.awaitCode(of: ticket, timeout: .zero))
        try phone.approveJoin(code: shown)
        let whole = try object(AccountObjects.joinApproval(ticket.id), in: cloud)
        try write(whole.prefix(whole.count / 2), AccountObjects.joinApproval(ticket.id), in: cloud)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.6) {
            try? whole.write(
                to: cloud.appendingPathComponent(AccountObjects.joinApproval(ticket.id)))
            finished.signal()
        }
        #expect(try tablet.awaitApproval(of: ticket, timeout: .seconds(10)))
        finished.wait()
        #expect(
            try tablet.keys.cloudKey(forUpload: false)
                == (try phone.keys.cloudKey()))
    }

    @Test(
        "approving takes a six-digit code: none or a malformed one approves nothing, nor does one with no request waiting; with more than one waiting the approving device cannot tell the user's, withdraws them all and approves nothing"
    )
    func approvingBlind() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        for bad in [nil, "", "12345", "1234567", "12a456", "１２３４５６"] {
            #expect(
                code { try phone.approveJoin(code: bad) } == .invalidPasscode,
                "\(bad ?? "nil")")
        }
        #expect(code { try phone.approveJoin(code: "123456") } == .invalidPasscode)
        let ticket = try tablet.requestJoin()
        let shown = try #require(
            try tablet.awaitCode(of: ticket, timeout: .seconds(1)))
        let planted = KeyDerivation.randomBytes(8).hexString
        try write(
            JoinRequestRecord(share: cloudShare(shown, id: planted).share).encoded(),
            AccountObjects.joinRequest(planted), in: cloud)
        #expect(code { try phone.approveJoin(code: shown) } == .authFailed)
        #expect(try CloudDirectory(cloud).list().filter { $0.hasPrefix("join-") }.isEmpty)
        #expect(
            code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(5)) }
                == .authFailed)
        #expect(try tablet.keys.cloudKey(forUpload: false) == nil)
    }

    @Test(
        "the approval vouches for the account state the phone itself has seen, not the epoch the cloud's account record shows"
    )
    func vouchesForItsOwnState() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        _ = try phone.replaceRecoveryKey()  // a rotation: epoch 1
        let key = try #require(try phone.keys.cloudKey())
        let seen = try #require(
            phone.manifests.seen.read(account: SeenManifest.account(key)))
        #expect(seen.epoch == 1)
        // The cloud lowers the record's epoch (its check stays the key's).
        var account = try #require(
            AccountRecord.parse(try object(AccountObjects.account, in: cloud)))
        account.epoch = 0
        try write(account.encoded(), AccountObjects.account, in: cloud)
        let ticket = try tablet.requestJoin()
        let shown = try #require(
            try tablet.awaitCode(of: ticket, timeout: .seconds(1)))
        try phone.approveJoin(code: shown)
        let approval = try #require(
            try openApproval(ticket.id, secret: ticket.secret, share: ticket.share, in: cloud))
        #expect(approval.epoch == seen.epoch && approval.manifestVersion == seen.version)
        #expect(approval.accountKey == key)  // a rotated key (64 bytes) carried whole
    }

    @Test(
        "a device that joined by approval refuses an account rolled back behind what the approving device vouched for"
    )
    func rollbackAfterApproval() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        // Two commits on the phone: keep a copy of the older manifest.
        let first = try #require(try phone.cloudSession())
        try first.commit()
        let older = try Data(contentsOf: cloud.appendingPathComponent(AccountManifest.name))
        let second = try #require(try phone.cloudSession())
        let objects = CloudObjects(cloudKey: second.key, kind: CloudObjects.kind("kv-"))
        let name = objects.name("com.example.wallet")
        try second.write(name, objects.seal(Data("newer".utf8), name: name))
        try second.commit()
        try phone.approve(tablet)
        // The cloud puts the older manifest back for the newcomer.
        try older.write(to: cloud.appendingPathComponent(AccountManifest.name))
        do {
            _ = try tablet.cloudSession(forUpload: false)
            Issue.record("the rolled-back manifest was taken")
        } catch {
            #expect(error.code == .corrupt && error.message.contains("rolled back"))
        }
    }
}

@Suite("A join code is answered once, however many approvals of it run at once")
struct AnsweredCodesTests {
    @Test(
        "16 approvals of one code at once (threads, each its own lock and file handle, as processes have): exactly one is recorded, the others refused; other codes still go in"
    )
    func concurrentApprovals() throws {
        let directory = Throwaway.directory("answered")
        let codes = AnsweredCodes(file: directory.appendingPathComponent("join-codes-answered"))
        let device = HeldAccountState(DeviceRecord.fresh())
        for round in 0..<5 {
            let code = String(format: "%06d", 100_000 + round * 7919)
            let outcomes = Mutex<[Bool]>([])
            let group = DispatchGroup()
            for _ in 0..<16 {
                group.enter()
                Thread {
                    let recorded = (try? codes.insert(code, device: device)) != nil
                    outcomes.withLock { $0.append(recorded) }
                    group.leave()
                }.start()
            }
            group.wait()
            #expect(outcomes.withLock { $0.filter { $0 }.count } == 1, "round \(round)")
        }
        try codes.insert("999999", device: device)
    }
}
