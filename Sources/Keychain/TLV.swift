import Foundation
import Sealing

/// Keychain's use of the shared record layout (`Sealing.TLV`): failures are `errSecDecode`.
enum KeychainTLV {
    static func fields(_ bytes: Data, magic: Data, knownTags: ClosedRange<UInt8>)
        throws(KeychainError)
        -> TLV.Fields
    {
        // A provider stopped before it saved can keep an item without its secret (kwalletd5).
        guard !bytes.isEmpty else {
            throw KeychainError(
                KeychainStatus.decode,
                "the Secret Service holds this item without its contents (lost when the provider stopped before it saved it): delete the item and add it again"
            )
        }
        do {
            return try TLV.fields(bytes, magic: magic, known: knownTags)
        } catch {
            throw malformed(error.message)
        }
    }

    static func malformed(_ why: String) -> KeychainError {
        KeychainError(
            KeychainStatus.decode,
            "malformed Keepsake record: \(why) (damaged when the provider stopped before it saved it, or changed by another program): delete the item and add it again"
        )
    }
}
