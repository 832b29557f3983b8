import Foundation
import Sealing

// Device-free, so the decoders build alone for the fuzzer (`scripts/fuzz`, target account-objects).

/// The cloud account's own objects. None holds anything a passcode guess can be tested against:
/// the account key is in the cloud only sealed under a random recovery key (160 bits), sealed under
/// the key of a join's code-keyed exchange (an approval), or at the escrow service (released to a
/// passcode claim under the escrow's own count).
enum AccountObjects {
    /// `account`: the account's public description (a check value of its key).
    static let account = "account"
    /// `account-recovery`: the account key sealed under a key derived from the recovery key.
    static let recovery = "account-recovery"
    /// `account-escrow`: the account key's slot at the escrow service (its ID only).
    static let escrow = "account-escrow"
    /// `join-<id>`: a new device's join request; `-approval`: the approving device's answer, the
    /// account key sealed under the key of their exchange.
    static func joinRequest(_ id: String) -> String { "join-\(id)" }
    static func joinApproval(_ id: String) -> String { "join-\(id)-approval" }
    /// `creating-<device>`: a device's intent to make the account (its time, ms), while it does.
    static func creating(_ deviceID: String) -> String { "creating-\(deviceID)" }
    /// Every object of one join.
    static func joinObjects(_ id: String) -> [String] {
        [joinRequest(id), joinApproval(id)]
    }
    /// `rekey-<device id>-<epoch>`: the key of `epoch`, sealed to the device's X25519 key, in an
    /// envelope under the key of the epoch before.
    static func rekey(_ deviceID: String, epoch: Int) -> String { "rekey-\(deviceID)-\(epoch)" }
    /// `removed-<device>`: when the device was removed, sealed under the key it held (so the
    /// removed device can tell, and the cloud cannot make one up).
    static func removed(_ deviceID: String) -> String { "removed-\(deviceID)" }

    /// `removed-<device>`'s bytes: when, sealed under the key the removed device still holds.
    static func removalNotice(_ deviceID: String, at date: Date, heldKey: SecureBytes) -> Data {
        Envelope.seal(
            Data(String(Int64(date.timeIntervalSince1970)).utf8),
            key: rekeyWrappingKey(heldKey), associatedData: Data(removed(deviceID).utf8))
    }

    /// When `removed-<device>` says the device was removed; nil when it does not open under
    /// `heldKey` as that device's.
    static func removalDate(_ bytes: Data, deviceID: String, heldKey: SecureBytes) -> Date? {
        guard
            let stamp = try? Envelope.open(
                bytes, key: rekeyWrappingKey(heldKey), associatedData: Data(removed(deviceID).utf8)),
            let seconds = stamp.withUnsafeBytes({ Int64(String(decoding: $0, as: UTF8.self)) })
        else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
    static func rekeyAssociatedData(_ deviceID: String, epoch: Int) -> Data {
        Data("keepsake.account.rekey.v1\0\(deviceID)\0\(epoch)".utf8)
    }
    static func rekeyWrappingKey(_ previous: SecureBytes) -> SecureBytes {
        KeyDerivation.keyedHash(
            key: AccountKey.epochKey(previous), context: "keepsake.account.rekey.v1")
    }
}

/// An account object stored as its four-byte magic and then JSON: it parses only with its magic,
/// the one version this code reads, and fields within their bounds (`isWellFormed`).
protocol TaggedRecord: Codable {
    static var magic: String { get }
    static var currentVersion: Int { get }
    var version: Int { get }
    /// Whether the decoded fields are within their bounds.
    var isWellFormed: Bool { get }
}

extension TaggedRecord {
    func encoded() -> Data { Data(Self.magic.utf8) + (try! JSONEncoder().encode(self)) }

    /// The record, or nil when it is not one.
    static func parse(_ bytes: Data) -> Self? {
        guard bytes.starts(with: Data(magic.utf8)),
            let record = try? JSONDecoder().decode(
                Self.self, from: bytes.dropFirst(magic.utf8.count)),
            record.version == currentVersion, record.isWellFormed
        else { return nil }
        return record
    }
}

/// `account`: the check value lets a device tell whether the key it holds is this account's. It
/// is a keyed hash under the (random, 256-bit) account key: nothing to guess against.
struct AccountRecord: TaggedRecord, Equatable {
    static let magic = "KAC1"
    static let currentVersion = 1
    var version = currentVersion
    var check: Data
    /// How many times the account key was rotated (nil: never).
    var epoch: Int?
    /// The recovery key's X25519 public key: `account-recovery` is sealed to it.
    var recoveryPublicKey: Data?
    /// `recoveryTag(key, recoveryPublicKey)` under the account key the record is checked with:
    /// the record is the cloud's to write, so a rotation seals the new key only to a recovery key
    /// the account named (`checkedRecoveryKey`), never to one the cloud put there.
    var recoveryTag: Data?

    init(check: Data, epoch: Int?, recoveryPublicKey: Data?, recoveryTag: Data? = nil) {
        self.check = check
        self.epoch = epoch
        self.recoveryPublicKey = recoveryPublicKey
        self.recoveryTag = recoveryTag
    }

    /// The record of `accountKey` at `epoch`, its recovery key tagged under it.
    init(accountKey: SecureBytes, epoch: Int, recoveryPublicKey: Data) {
        self.init(
            check: Self.check(accountKey), epoch: epoch, recoveryPublicKey: recoveryPublicKey,
            recoveryTag: Self.recoveryTag(accountKey, recoveryPublicKey))
    }

    static func check(_ accountKey: SecureBytes) -> Data { CloudObjects.accountCheck(accountKey) }

    static func recoveryTag(_ accountKey: SecureBytes, _ recoveryPublicKey: Data) -> Data {
        KeyDerivation.keyedHash(
            key: accountKey, context: "keepsake.account.recovery-key.v1", recoveryPublicKey
        ).unsafeData()
    }

    /// The recovery public key, when the tag shows `accountKey`'s holder named it; nil when it is
    /// missing, or the cloud wrote it (or its tag).
    func checkedRecoveryKey(_ accountKey: SecureBytes) -> Data? {
        guard let recoveryPublicKey, let recoveryTag,
            constantTimeEquals(recoveryTag, Self.recoveryTag(accountKey, recoveryPublicKey))
        else { return nil }
        return recoveryPublicKey
    }

    var isWellFormed: Bool {
        check.count == 32 && (0...Int(Int32.max)).contains(epoch ?? 0)
            && recoveryPublicKey.map({ $0.count == SealedBox.publicKeyLength }) ?? true
            && recoveryTag.map({ $0.count == 32 }) ?? true
    }
}

/// `account-escrow`: the account key's slot at the escrow service (`EscrowConfiguration`). The
/// escrow keeps the passcode key's salt and cost and the count; the cloud only names the slot.
struct EscrowRecord: TaggedRecord, Equatable {
    static let magic = "KES2"
    static let currentVersion = 2
    var version = currentVersion
    var slot: Data

    var isWellFormed: Bool { slot.count == 16 }
}

/// `join-<id>`: a new device's share of the password-authenticated exchange
/// (`PasswordKeyExchange`) keyed by the six-digit code it shows and the request's ID. The code
/// never leaves the new device's screen: the user types it on the approving device, which answers
/// with a share of its own and the approval sealed under the exchange's key. A cloud in the middle
/// has to guess the code to make a share that opens anything (one chance in 10⁶ per request it
/// makes or answers), and the shares it sees let it test no guess offline.
struct JoinRequestRecord: TaggedRecord, Equatable {
    static let magic = "KJR3"
    static let currentVersion = 3
    var version = currentVersion
    var share: Data

    var isWellFormed: Bool { share.count == OPRF.elementLength }
}

/// `join-<id>-approval`: the approving device's share and the approval (`JoinApproval`) sealed
/// under the exchange's key, the request's ID and both shares as its associated data. Binary, as
/// sealed objects are: the magic, the share, the envelope.
struct JoinApprovalRecord: Equatable {
    static let magic = Data("KJA3".utf8)
    var share: Data
    var sealed: Data

    func encoded() -> Data { Self.magic + share + sealed }

    /// The record, or nil when it is not one whole: its envelope holds an approval of one of the
    /// two lengths there are (a server that is still writing it shows fewer bytes).
    static func parse(_ bytes: Data) -> JoinApprovalRecord? {
        let bytes = Data(bytes)
        let headerLength = magic.count + OPRF.elementLength
        guard bytes.starts(with: magic),
            JoinApproval.keyLengths.contains(bytes.count - headerLength - Envelope.overhead - 16)
        else { return nil }
        return JoinApprovalRecord(
            share: Data(bytes[magic.count..<headerLength]), sealed: Data(bytes[headerLength...]))
    }
}

enum JoinCode {
    /// Six random digits, uniformly: what the new device shows and the exchange is keyed by.
    static func random() -> String {
        while true {
            let number = KeyDerivation.randomBytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            // 4,294,000,000 is the largest multiple of 10⁶ below 2³²: no digit more likely.
            guard number < 4_294_000_000 else { continue }
            let text = String(number % 1_000_000)
            return String(repeating: "0", count: 6 - text.count) + text
        }
    }

    /// Whether `code` is six ASCII digits.
    static func isWellFormed(_ code: String) -> Bool {
        code.utf8.count == 6 && code.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// The exchange's session: the request's ID.
    static func session(_ id: String) -> Data { Data(id.utf8) }

    /// What the approval's envelope authenticates beside its bytes: the request and both shares.
    static func approvalAssociatedData(_ id: String, request: Data, approver: Data) -> Data {
        Data("keepsake.join.approval.v3".utf8) + Data(id.utf8) + request + approver
    }
}

/// What an approval carries to the new device, boxed from the approver's key for this join to the
/// new device's: the account key and the account state the approving device vouches for (so a
/// cloud that shows the new device an older state is refused).
struct JoinApproval {
    var accountKey: SecureBytes
    var epoch: Int
    var manifestVersion: UInt64

    /// The account key (32 bytes, or 64 once rotated: `AccountKey`), then the epoch and the
    /// manifest version, 8 bytes each.
    static let keyLengths: Set = [32, 64]

    func encoded() -> SecureBytes {
        let keyLength = accountKey.count
        precondition(Self.keyLengths.contains(keyLength), "an account key is 32 or 64 bytes")
        return SecureBytes(count: keyLength + 16) { out in
            accountKey.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[..<keyLength]).copyMemory(from: $0)
            }
            var tail = Data()
            withUnsafeBytes(of: Int64(epoch).bigEndian) { tail.append(contentsOf: $0) }
            withUnsafeBytes(of: manifestVersion.bigEndian) { tail.append(contentsOf: $0) }
            UnsafeMutableRawBufferPointer(rebasing: out[keyLength...]).copyBytes(from: tail)
        }
    }

    static func parse(_ bytes: SecureBytes) -> JoinApproval? {
        let keyLength = bytes.count - 16
        guard keyLengths.contains(keyLength) else { return nil }
        return bytes.withUnsafeBytes { raw in
            let epoch = raw[keyLength..<keyLength + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let version = raw[(keyLength + 8)...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard epoch <= UInt64(Int32.max) else { return nil }
            return JoinApproval(
                accountKey: SecureBytes(count: keyLength) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[0..<keyLength]))
                },
                epoch: Int(epoch), manifestVersion: version)
        }
    }
}

/// The recovery key: 160 random bits, shown once as base32 in groups of four
/// (`ABCD-EFGH-…`, 8 groups). Typed back in any case, with or without dashes and spaces.
package enum RecoveryKey {
    static let byteCount = 20
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// A new recovery key: its bytes in owned memory and its text to show once.
    static func make() -> (key: SecureBytes, text: SecureBytes) {
        let key = SecureBytes(randomCount: byteCount)
        return (key, format(key))
    }

    /// The key's text (base32, 8 groups of 4, dash-separated), in owned memory.
    static func format(_ key: SecureBytes) -> SecureBytes {
        SecureBytes(count: 39) { out in
            key.withUnsafeBytes { bytes in
                var bits: UInt64 = 0
                var count = 0
                var written = 0
                var symbols = 0
                for byte in bytes {
                    bits = bits << 8 | UInt64(byte)
                    count += 8
                    while count >= 5 {
                        count -= 5
                        if symbols > 0 && symbols % 4 == 0 {
                            out[written] = UInt8(ascii: "-")
                            written += 1
                        }
                        out[written] = alphabet[Int((bits >> UInt64(count)) & 31)]
                        written += 1
                        symbols += 1
                    }
                }
            }
        }
    }

    /// The key typed back, or nil when it is not one (wrong length, a letter outside base32).
    package static func parse(_ text: SecureBytes) -> SecureBytes? {
        var valid = true
        var symbols = 0
        let key = SecureBytes(count: byteCount) { out in
            var bits: UInt64 = 0
            var count = 0
            var written = 0
            text.withUnsafeBytes { input in
                for var character in input {
                    if character == UInt8(ascii: "-") || character == UInt8(ascii: " ") { continue }
                    if (0x61...0x7A).contains(character) { character -= 0x20 }
                    guard let value = alphabet.firstIndex(of: character) else {
                        valid = false
                        return
                    }
                    symbols += 1
                    bits = bits << 5 | UInt64(value)
                    count += 5
                    if count >= 8 {
                        count -= 8
                        guard written < out.count else {
                            valid = false
                            return
                        }
                        out[written] = UInt8(truncatingIfNeeded: bits >> UInt64(count))
                        written += 1
                    }
                }
            }
            bits = 0
        }
        guard valid, symbols == 32 else { return nil }
        return key
    }

    /// The key pair `account-recovery` is sealed to: its public key is in `account`, so any
    /// device of the account re-seals a rotated key to it; only the recovery key opens it.
    static func keyPair(_ key: SecureBytes) -> (publicKey: Data, secretKey: SecureBytes) {
        SealedBox.keyPair(
            seed: KeyDerivation.keyedHash(key: key, context: "keepsake.account.recovery-key.v2"))
    }
}
