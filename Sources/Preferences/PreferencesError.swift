import Foundation
import Sealing
import Platform

/// Whose codes `PreferencesError`'s are.
public enum PreferencesErrorDomain {}

/// The one error type of the Preferences module. Compares by code; the message says what went
/// wrong in words, never a value.
public typealias PreferencesError = CodedError<PreferencesErrorDomain>

extension ErrorCode<PreferencesErrorDomain> {
    /// Backup rules, a preferences file or a name that is not acceptable (malformed XML, a
    /// path leaving its domain, …): refused, nothing changed.
    public static var invalidInput: Self { Self("invalid input") }
    /// The backup is over Auto Backup's 25 MB quota: nothing was backed up.
    public static var overQuota: Self { Self("over quota") }
    /// A stored backup or bundle that does not decode or authenticate.
    public static var corrupt: Self { Self("corrupt") }
    /// The device, the disk or the cloud account failed underneath (see `underlying`).
    public static var notAvailable: Self { Self("not available") }
}
