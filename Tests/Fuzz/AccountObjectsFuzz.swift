// libFuzzer target: the cloud account's own objects (Sources/CloudAccount/AccountObjects.swift) — its
// record, the escrow record, join requests, answers, reveals and approvals' contents, and typed recovery keys — the objects a cloud holds
// outside a seal.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Data(bytes: data, count: size)
    if let record = AccountRecord.parse(bytes) {
        precondition(record.check.count == 32 && AccountRecord.parse(record.encoded()) == record)
    }
    if let escrow = EscrowRecord.parse(bytes) {
        // Accepted records name a slot of the escrow's length and survive re-encoding.
        precondition(escrow.slot.count == 16 && EscrowRecord.parse(escrow.encoded()) == escrow)
    }
    if let request = JoinRequestRecord.parse(bytes) {
        precondition(
            request.commitment.count == 32 && JoinRequestRecord.parse(request.encoded()) == request)
    }
    if let challenge = JoinChallengeRecord.parse(bytes) {
        precondition(
            challenge.nonce.count == 32
                && JoinChallengeRecord.parse(challenge.encoded()) == challenge)
        let code = JoinCode.of(
            joiner: challenge.publicKey, joinerNonce: challenge.nonce,
            approver: challenge.publicKey,
            approverNonce: challenge.nonce)
        precondition(code.count == 6 && code.allSatisfy(\.isNumber))
    }
    if let reveal = JoinRevealRecord.parse(bytes) {
        precondition(JoinRevealRecord.parse(reveal.encoded()) == reveal)
    }
    if let approval = JoinApproval.parse(SecureBytes(copying: bytes)) {
        // The account key and the state an approval vouches for survive re-encoding.
        let again = JoinApproval.parse(approval.encoded())!
        precondition(
            again.accountKey == approval.accountKey && again.epoch == approval.epoch
                && again.manifestVersion == approval.manifestVersion)
    }
    if let key = RecoveryKey.parse(SecureBytes(copying: bytes)) {
        // A parsed key prints as 8 groups of 4 and parses back to itself.
        let text = RecoveryKey.format(key)
        precondition(text.count == 39 && RecoveryKey.parse(text) == key)
    }
    return 0
}
