import Foundation
import Sealing

// Device-free, so the decoder builds alone for the fuzzer (`scripts/fuzz`, target account-key).

/// The account key blob in the cloud: the account's cloud key sealed under Argon2id of a device's
/// passcode, so a new device restores only by proving that passcode. Its check value lets a device
/// tell whether the cloud key it holds is this account's.
struct AccountKeyBlob: Codable, Equatable {
    static let name = "account-key"
    var version = 1
    var salt: Data
    var cost: Argon2Cost
    var wrappedKey: Data
    var check: Data

    static func associatedData() -> Data { Data("keepsake.cloud.account-key.v1".utf8) }
    static func check(_ cloudKey: SecureBytes) -> Data { CloudObjects.accountCheck(cloudKey) }

    func encoded() -> Data { Data("KCK1".utf8) + (try! JSONEncoder().encode(self)) }
    /// The blob, or nil when it is not one (another version, a salt of the wrong size, a cost out
    /// of bounds, not JSON).
    static func parse(_ bytes: Data) -> AccountKeyBlob? {
        guard bytes.starts(with: Data("KCK1".utf8)),
            let blob = try? JSONDecoder().decode(AccountKeyBlob.self, from: bytes.dropFirst(4)),
            blob.version == 1, blob.salt.count == KeyDerivation.saltLength,
            blob.cost.isWithinBounds
        else { return nil }
        return blob
    }
}
