import Foundation
import Sealing

/// The one error type of the Preferences module. Compares by code; the message says what went
/// wrong in words, never a value.
public struct PreferencesError: KeepsakeError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidInput, overQuota, corrupt, notAvailable
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }
        /// Backup rules, a preferences file or a name that is not acceptable (malformed XML, a
        /// path leaving its domain, …): refused, nothing changed.
        public static let invalidInput = Code(.invalidInput)
        /// The backup is over Auto Backup's 25 MB quota: nothing was backed up.
        public static let overQuota = Code(.overQuota)
        /// A stored backup or bundle that does not decode or authenticate.
        public static let corrupt = Code(.corrupt)
        /// The device, the disk or the cloud account failed underneath (see `underlying`).
        public static let notAvailable = Code(.notAvailable)
        public var description: String {
            switch value {
            case .invalidInput: "invalid input"
            case .overQuota: "over quota"
            case .corrupt: "corrupt"
            case .notAvailable: "not available"
            }
        }
    }

    public let code: Code
    public let message: String
    public let underlying: (any Error & Sendable)?

    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}
