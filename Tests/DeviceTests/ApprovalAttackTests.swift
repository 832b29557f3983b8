import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import CloudAccount
@testable import Device

/// A phone with a pin that made the account on a directory cloud, and a tablet with a pin of its
/// own signed in to it (not yet joined).
private func phoneAndTablet() throws -> (
    cloud: URL, phone: Device, tablet: Device, keep: [PrivateSecretService]
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

@Suite(
    "Approval joins against a hostile cloud: grinding, swapping, planting, approving blind",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct ApprovalAttackTests {
    @Test(
        "a cloud in the middle that swaps the request for its own key (committed before the answer, revealed after) shows the phone another code: the code the user types withdraws the requests, the new device stops with a clear error, no approval is written"
    )
    func manInTheMiddle() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        // The cloud's own request under the same name: its key, a commitment to its nonce.
        let mallory = SealedBox.keyPair()
        let nonce = KeyDerivation.randomBytes(32)
        try write(
            JoinRequestRecord(
                publicKey: mallory.publicKey,
                commitment: JoinCode.commitment(publicKey: mallory.publicKey, nonce: nonce)
            ).encoded(), AccountObjects.joinRequest(ticket.id), in: cloud)
        _ = try phone.joinRequests()  // the phone answers what it is shown
        let shown = try #require(try tablet.awaitCode(of: ticket, timeout: .seconds(5)))
        // The cloud reveals its own nonce in place of the tablet's.
        try write(
            JoinRevealRecord(nonce: nonce).encoded(), AccountObjects.joinReveal(ticket.id),
            in: cloud)
        let phoneSees = try #require(try phone.joinRequests().first?.code)
        #expect(phoneSees != shown)  // one chance in 10⁶ that they match
        // The user types the code the tablet shows: it matches nothing, the requests go.
        #expect(code { try phone.approveJoin(code: shown) } == .authFailed)
        #expect(try CloudDirectory(cloud).read(AccountObjects.joinApproval(ticket.id)) == nil)
        #expect(
            code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(5)) } == .authFailed)
        #expect(try tablet.cloudKey(forUpload: false) == nil)
    }

    @Test(
        "a cloud that grinds keys after seeing the phone's answer cannot use them: a reveal that does not match the request's commitment shows no code, and nothing is approved"
    )
    func grindingAfterTheAnswer() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        _ = try phone.joinRequests()
        let shown = try #require(try tablet.awaitCode(of: ticket, timeout: .seconds(5)))
        // Knowing the answer, the cloud grinds nonces for a chosen target code; whatever it
        // finds, the request's commitment binds the tablet's nonce.
        let challenge = try #require(
            JoinChallengeRecord.parse(
                try object(AccountObjects.joinChallenge(ticket.id), in: cloud)))
        let request = try #require(
            JoinRequestRecord.parse(try object(AccountObjects.joinRequest(ticket.id), in: cloud)))
        var ground: Data?
        for _ in 0..<20_000 {
            let candidate = KeyDerivation.randomBytes(32)
            if JoinCode.of(
                joiner: request.publicKey, joinerNonce: candidate, approver: challenge.publicKey,
                approverNonce: challenge.nonce
            ).hasPrefix(String(shown.prefix(2)) == "00" ? "01" : "00") {
                ground = candidate
                break
            }
        }
        try write(
            JoinRevealRecord(nonce: try #require(ground)).encoded(),
            AccountObjects.joinReveal(ticket.id), in: cloud)
        #expect(try phone.joinRequests().first?.code == nil)
        #expect(code { try phone.approveJoin(code: shown) } == .invalidPasscode)
        #expect(try CloudDirectory(cloud).read(AccountObjects.joinApproval(ticket.id)) == nil)
    }

    @Test(
        "a cloud that rewrites the phone's answer (the phone's key, a nonce of the cloud's choosing) or the request it answered cannot choose the code the phone shows: the phone shows none and approves nothing"
    )
    func rewrittenAnswer() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        // The cloud's own request under the tablet's name, committed before the phone answers.
        let mallory = SealedBox.keyPair()
        let malloryNonce = KeyDerivation.randomBytes(32)
        try write(
            JoinRequestRecord(
                publicKey: mallory.publicKey,
                commitment: JoinCode.commitment(publicKey: mallory.publicKey, nonce: malloryNonce)
            ).encoded(), AccountObjects.joinRequest(ticket.id), in: cloud)
        _ = try phone.joinRequests()  // the phone answers what it is shown
        let answered = try #require(
            JoinChallengeRecord.parse(
                try object(AccountObjects.joinChallenge(ticket.id), in: cloud)))
        try write(
            JoinRevealRecord(nonce: malloryNonce).encoded(), AccountObjects.joinReveal(ticket.id),
            in: cloud)
        let honest = try #require(try phone.joinRequests().first?.code)
        // The phone's key with a nonce the cloud picked after the reveal: were it taken, the
        // cloud would pick it until the phone's code matched the one the tablet shows.
        let chosenNonce = KeyDerivation.randomBytes(32)
        try write(
            JoinChallengeRecord(publicKey: answered.publicKey, nonce: chosenNonce).encoded(),
            AccountObjects.joinChallenge(ticket.id), in: cloud)
        let chosen = JoinCode.of(
            joiner: mallory.publicKey, joinerNonce: malloryNonce, approver: answered.publicKey,
            approverNonce: chosenNonce)
        #expect(try phone.joinRequests().map(\.code) == [nil])
        #expect(code { try phone.approveJoin(code: chosen) } == .invalidPasscode)
        #expect(code { try phone.approveJoin(code: honest) } == .invalidPasscode)
        // The phone's own answer put back, under a request the cloud changed after it (another
        // commitment): no code either.
        try write(answered.encoded(), AccountObjects.joinChallenge(ticket.id), in: cloud)
        #expect(try phone.joinRequests().first?.code == honest)
        let otherNonce = KeyDerivation.randomBytes(32)
        try write(
            JoinRequestRecord(
                publicKey: mallory.publicKey,
                commitment: JoinCode.commitment(publicKey: mallory.publicKey, nonce: otherNonce)
            ).encoded(), AccountObjects.joinRequest(ticket.id), in: cloud)
        try write(
            JoinRevealRecord(nonce: otherNonce).encoded(), AccountObjects.joinReveal(ticket.id),
            in: cloud)
        #expect(try phone.joinRequests().map(\.code) == [nil])
        #expect(try CloudDirectory(cloud).read(AccountObjects.joinApproval(ticket.id)) == nil)
    }

    @Test(
        "the approval vouches for the account state the phone itself has seen, not the epoch the cloud's account record shows"
    )
    func vouchesForItsOwnState() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        _ = try phone.replaceRecoveryKey()  // a rotation: epoch 1
        let key = try #require(try phone.cloudKey())
        let seen = try #require(phone.seenManifest.read(account: SeenManifest.account(key)))
        #expect(seen.epoch == 1)
        // The cloud lowers the record's epoch (its check stays the key's).
        var account = try #require(
            AccountRecord.parse(try object(AccountObjects.account, in: cloud)))
        account.epoch = 0
        try write(account.encoded(), AccountObjects.account, in: cloud)
        let ticket = try tablet.requestJoin()
        _ = try phone.joinRequests()
        let shown = try #require(try tablet.awaitCode(of: ticket, timeout: .seconds(5)))
        try phone.approveJoin(code: shown)
        let challenge = try #require(
            JoinChallengeRecord.parse(
                try object(AccountObjects.joinChallenge(ticket.id), in: cloud)))
        let approval = try #require(
            JoinApproval.parse(
                try SealedBox.unbox(
                    try object(AccountObjects.joinApproval(ticket.id), in: cloud),
                    from: challenge.publicKey, secretKey: ticket.secretKey)))
        #expect(approval.epoch == seen.epoch && approval.manifestVersion == seen.version)
    }

    @Test(
        "approving takes the code the new device shows: none, a malformed one, or one when nothing shows a code yet approves nothing; more than 8 pending requests are refused; among planted requests only the typed code's is approved"
    )
    func approvingBlind() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        for bad in [nil, "", "12345", "1234567", "12a456", "１２３４５６"] {
            #expect(
                code { try phone.approveJoin(code: bad) } == .invalidPasscode, "\(bad ?? "nil")")
        }
        // None shown yet:
        #expect(code { try phone.approveJoin(code: "123456") } == .invalidPasscode)
        // Three planted requests beside the real one, each revealed: the phone answers them all,
        // and approves only the one whose code the user typed.
        for _ in 0..<3 {
            let pair = SealedBox.keyPair()
            let nonce = KeyDerivation.randomBytes(32)
            let id = KeyDerivation.randomBytes(8).hexString
            try write(
                JoinRequestRecord(
                    publicKey: pair.publicKey,
                    commitment: JoinCode.commitment(publicKey: pair.publicKey, nonce: nonce)
                ).encoded(), AccountObjects.joinRequest(id), in: cloud)
            _ = try phone.joinRequests()
            try write(
                JoinRevealRecord(nonce: nonce).encoded(), AccountObjects.joinReveal(id), in: cloud)
        }
        let shown = try #require(try tablet.awaitCode(of: ticket, timeout: .seconds(5)))
        #expect(try phone.joinRequests().compactMap(\.code).count == 4)
        try phone.approveJoin(code: shown)
        #expect(try tablet.awaitApproval(of: ticket, timeout: .seconds(5)))
        let approvals = try CloudDirectory(cloud).list().filter { $0.hasSuffix("-approval") }
        #expect(approvals.isEmpty)  // the tablet's was taken; no planted one got any
        // Nine pending requests: refused outright.
        var nine: [String] = []
        for _ in 0..<9 {
            let pair = SealedBox.keyPair()
            nine.append(KeyDerivation.randomBytes(8).hexString)
            try write(
                JoinRequestRecord(publicKey: pair.publicKey, commitment: Data(count: 32)).encoded(),
                AccountObjects.joinRequest(nine.last!), in: cloud)
        }
        #expect(code { try phone.approveJoin(code: "000000") } == .invalidPasscode)
        // None of them was read or answered: each answer is a code a cloud could hold ready.
        #expect(try phone.joinRequests().allSatisfy { $0.code == nil })
        let answered = Set(try CloudDirectory(cloud).list())
        #expect(nine.allSatisfy { !answered.contains(AccountObjects.joinChallenge($0)) })
    }

    @Test(
        "an approval that is not from the key the new device's code was computed with — the cloud boxing an account key of its own to the new device — is refused: nothing joined"
    )
    func plantedApproval() throws {
        let (cloud, phone, tablet, keep) = try phoneAndTablet()
        defer { withExtendedLifetime(keep) {} }
        let ticket = try tablet.requestJoin()
        _ = try phone.joinRequests()
        _ = try #require(try tablet.awaitCode(of: ticket, timeout: .seconds(5)))
        let request = try #require(
            JoinRequestRecord.parse(try object(AccountObjects.joinRequest(ticket.id), in: cloud)))
        // The cloud's approval: some key, boxed to the tablet from a key of the cloud's.
        let mallory = SealedBox.keyPair()
        let planted = try SealedBox.box(
            JoinApproval(accountKey: SecureBytes(randomCount: 32), epoch: 0, manifestVersion: 0)
                .encoded(), to: request.publicKey, from: mallory.secretKey)
        try write(planted, AccountObjects.joinApproval(ticket.id), in: cloud)
        #expect(code { _ = try tablet.awaitApproval(of: ticket, timeout: .seconds(5)) } == .corrupt)
        #expect(try tablet.cloudKey(forUpload: false) == nil)
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
