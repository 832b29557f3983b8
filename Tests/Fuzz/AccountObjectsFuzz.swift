// libFuzzer target: the cloud account's own objects (Sources/CloudAccount/AccountObjects.swift) — its
// record, the escrow record, join requests and approvals (their shares of the join's key
// exchange) and approvals' contents, and typed recovery keys — the objects a cloud holds outside a
// seal.
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
            request.share.count == 32 && JoinRequestRecord.parse(request.encoded()) == request)
        // A share from the cloud: either no element (refused) or a 32-byte key, never a crash.
        let mine = PasswordKeyExchange.share(
            password: SecureBytes(copying: Data("123456".utf8)), session: Data("fuzz".utf8))
        if let key = try? PasswordKeyExchange.key(
            secret: mine.secret, peerShare: request.share, initiatorShare: request.share,
            responderShare: mine.share, session: Data("fuzz".utf8))
        {
            precondition(key.count == 32)
        }
    }
    if let answer = JoinApprovalRecord.parse(bytes) {
        precondition(
            answer.share.count == 32 && answer.sealed.count <= 512
                && JoinApprovalRecord.parse(answer.encoded()) == answer)
    }
    if let text = String(data: bytes, encoding: .utf8), JoinCode.isWellFormed(text) {
        precondition(text.count == 6 && text.allSatisfy { $0.isASCII && $0.isNumber })
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
