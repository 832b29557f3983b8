import Foundation
import Sealing

// Device-free, so the decoders build alone for the fuzzer (`scripts/fuzz`, target account-objects).

/// The cloud account's own objects. None holds anything a passcode guess can be tested against:
/// the account key is in the cloud only sealed under a random recovery key (160 bits), sealed to a
/// device's X25519 key (an approval), or at the escrow service (released to a passcode claim under
/// the escrow's own count).
enum AccountObjects {
    /// `account`: the account's public description (a check value of its key).
    static let account = "account"
    /// `account-recovery`: the account key sealed under a key derived from the recovery key.
    static let recovery = "account-recovery"
    /// `account-escrow`: the account key's slot at the escrow service (its ID only).
    static let escrow = "account-escrow"
    /// `join-<id>`: a new device's join request; `-challenge`: the approving device's answer;
    /// `-reveal`: the new device's nonce; `-approval`: the account key, boxed to the new device.
    static func joinRequest(_ id: String) -> String { "join-\(id)" }
    static func joinChallenge(_ id: String) -> String { "join-\(id)-challenge" }
    static func joinReveal(_ id: String) -> String { "join-\(id)-reveal" }
    static func joinApproval(_ id: String) -> String { "join-\(id)-approval" }
    /// `creating-<device>`: a device's intent to make the account (its time, ms), while it does.
    static func creating(_ deviceID: String) -> String { "creating-\(deviceID)" }
    /// Every object of one join.
    static func joinObjects(_ id: String) -> [String] {
        [joinRequest(id), joinChallenge(id), joinReveal(id), joinApproval(id)]
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

/// `join-<id>`: a new device's X25519 public key and a commitment to a nonce it reveals only
/// after the approving device answered (`join-<id>-challenge`) — so the six-digit code both
/// devices show depends on randomness from both, fixed before either side saw the other's, and a
/// cloud in the middle cannot grind keys to a matching code (it wins with one chance in 10⁶ per
/// join, and a mismatch is noticed).
struct JoinRequestRecord: TaggedRecord, Equatable {
    static let magic = "KJR2"
    static let currentVersion = 2
    var version = currentVersion
    var publicKey: Data
    var commitment: Data

    var isWellFormed: Bool {
        publicKey.count == SealedBox.publicKeyLength && commitment.count == 32
    }
}

/// `join-<id>-challenge`: the approving device's X25519 public key for this join and its nonce.
struct JoinChallengeRecord: TaggedRecord, Equatable {
    static let magic = "KJC1"
    static let currentVersion = 1
    var version = currentVersion
    var publicKey: Data
    var nonce: Data

    var isWellFormed: Bool { publicKey.count == SealedBox.publicKeyLength && nonce.count == 32 }
}

/// `join-<id>-reveal`: the new device's nonce, revealed once the challenge is there.
struct JoinRevealRecord: TaggedRecord, Equatable {
    static let magic = "KJV1"
    static let currentVersion = 1
    var version = currentVersion
    var nonce: Data

    var isWellFormed: Bool { nonce.count == 32 }
}

enum JoinCode {
    /// What the new device commits to: its nonce, bound to its key.
    static func commitment(publicKey: Data, nonce: Data) -> Data {
        KeyDerivation.keyedHash(
            key: SecureBytes(copying: Data(repeating: 0x4B, count: 32)),
            context: "keepsake.join.commitment.v2", publicKey + nonce
        ).unsafeData()
    }

    /// Six digits from both devices' keys and nonces.
    static func of(
        joiner: Data, joinerNonce: Data, approver: Data, approverNonce: Data
    ) -> String {
        let digest = KeyDerivation.keyedHash(
            key: SecureBytes(copying: Data(repeating: 0x4A, count: 32)),
            context: "keepsake.join.code.v2", joiner + joinerNonce + approver + approverNonce
        ).unsafeData()
        let number = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000
        let text = String(number)
        return String(repeating: "0", count: 6 - text.count) + text
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
