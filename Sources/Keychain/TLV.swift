import Foundation
import Sealing

/// Keychain's use of the shared record layout (`Sealing.TLV`): failures are `errSecDecode`.
enum KeychainTLV {
    static func fields(_ bytes: Data, magic: Data, knownTags: ClosedRange<UInt8>)
        throws(KeychainError)
        -> TLV.Fields
    {
        do {
            return try TLV.fields(bytes, magic: magic, known: knownTags)
        } catch {
            throw malformed(error.message)
        }
    }

    static func malformed(_ why: String) -> KeychainError {
        KeychainError(KeychainStatus.decode, "malformed Keepsake record: \(why)")
    }
}
