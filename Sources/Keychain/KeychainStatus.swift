/// An Apple `OSStatus` of the keychain, Errno-style: the raw `Int32` exactly as Apple numbers it,
/// with Apple's names (`status == .itemNotFound`, `KeychainStatus.itemNotFound.name` is
/// `errSecItemNotFound`). A status Apple has no name for is still carried exactly.
public struct KeychainStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `OSStatus`: Apple's number.
    public let rawValue: Int32
    /// The status of an `OSStatus`, whether Apple names it or not.
    public init(rawValue: Int32) { self.rawValue = rawValue }
    /// The status of an `OSStatus`, unlabeled: `KeychainStatus(-25300)`.
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// `errSecSuccess`: no error.
    public static let success = KeychainStatus(0)
    /// `errSecUnimplemented`: an Apple key, class or change Keepsake refuses rather than ignores.
    public static let unimplemented = KeychainStatus(-4)
    /// `errSecDiskFull`: the disk is full.
    public static let diskFull = KeychainStatus(-34)
    /// `errSecIO`: an I/O error.
    public static let io = KeychainStatus(-36)
    /// `errSecParam`: invalid input (a wrong value, a key not allowed in the call, a secret over
    /// 64 KiB); nothing is written.
    public static let param = KeychainStatus(-50)
    /// `errSecWrPerm`: a write permissions error.
    public static let writePermissions = KeychainStatus(-61)
    /// `errSecAllocate`: memory could not be allocated.
    public static let allocate = KeychainStatus(-108)
    /// `errSecUserCanceled`: the user canceled the operation.
    public static let userCanceled = KeychainStatus(-128)
    /// `errSecBadReq`: a bad parameter or an invalid state for the operation.
    public static let badRequest = KeychainStatus(-909)
    /// `errSecNotAvailable`: the Secret Service could not be reached or did not answer within its
    /// bound, or the device's storage could not be used.
    public static let notAvailable = KeychainStatus(-25291)
    /// `errSecReadOnly`: the keychain cannot be modified.
    public static let readOnly = KeychainStatus(-25292)
    /// `errSecAuthFailed`: a wrong device passcode or application password, an access constraint
    /// nothing on Linux meets (biometry), or a device disabled by its guess limit.
    public static let authFailed = KeychainStatus(-25293)
    /// `errSecNoSuchKeychain`: the keychain could not be found.
    public static let noSuchKeychain = KeychainStatus(-25294)
    /// `errSecDuplicateItem`: an item with this primary key exists (an add, or an update that would
    /// make two).
    public static let duplicateItem = KeychainStatus(-25299)
    /// `errSecItemNotFound`: nothing matches the query.
    public static let itemNotFound = KeychainStatus(-25300)
    /// `errSecBufferTooSmall`: not enough memory to use the item.
    public static let bufferTooSmall = KeychainStatus(-25301)
    /// `errSecDataTooLarge`: the item holds data too large or in a format that cannot be shown.
    public static let dataTooLarge = KeychainStatus(-25302)
    /// `errSecNoSuchAttr`: an attribute the item's class does not have (an internet attribute on
    /// a generic password, a service or generic attribute on an internet password).
    public static let noSuchAttribute = KeychainStatus(-25303)
    /// `errSecInvalidItemRef`: the item is no longer valid (it may have been deleted).
    public static let invalidItemRef = KeychainStatus(-25304)
    /// `errSecNoSuchClass`: the item does not appear to be a valid keychain item.
    public static let noSuchClass = KeychainStatus(-25306)
    /// `errSecInteractionNotAllowed`: the device is locked for the item's class, the Secret Service
    /// collection is locked or wants a prompt, or a credential the item needs was not given.
    public static let interactionNotAllowed = KeychainStatus(-25308)
    /// `errSecReadOnlyAttr`: the attribute cannot be modified.
    public static let readOnlyAttribute = KeychainStatus(-25309)
    /// `errSecInteractionRequired`: user interaction is required but not allowed now.
    public static let interactionRequired = KeychainStatus(-25315)
    /// `errSecDataNotAvailable`: the item's contents cannot be retrieved.
    public static let dataNotAvailable = KeychainStatus(-25316)
    /// `errSecDataNotModifiable`: the item's contents cannot be modified.
    public static let dataNotModifiable = KeychainStatus(-25317)
    /// `errSecDecode`: a stored item (or the device's state) does not decode or authenticate, or an
    /// item's record does not match its index.
    public static let decode = KeychainStatus(-26275)
    /// `errSecMissingEntitlement`: an access group the app is not entitled to.
    public static let missingEntitlement = KeychainStatus(-34018)

    /// Apple's constant name (`errSecDuplicateItem`), or `OSStatus <n>` for a number Apple does
    /// not name.
    public var name: String { Self.table[rawValue]?.name ?? "OSStatus \(rawValue)" }

    /// Apple's message for the status, as `SecCopyErrorMessageString` gives it.
    public var message: String {
        Self.table[rawValue]?.message ?? "OSStatus \(rawValue)"
    }

    /// `errSecItemNotFound (-25300)`, as the command line prints it.
    public var description: String { "\(name) (\(rawValue))" }

    /// Apple's names and messages (`SecBase.h`).
    private static let table: [Int32: (name: String, message: String)] = [
        0: ("errSecSuccess", "No error."),
        -4: ("errSecUnimplemented", "Function or operation not implemented."),
        -34: ("errSecDiskFull", "The disk is full."),
        -36: ("errSecIO", "I/O error."),
        -50: ("errSecParam", "One or more parameters passed to a function were not valid."),
        -61: ("errSecWrPerm", "Write permissions error."),
        -108: ("errSecAllocate", "Failed to allocate memory."),
        -128: ("errSecUserCanceled", "User canceled the operation."),
        -909: ("errSecBadReq", "Bad parameter or invalid state for operation."),
        -25291: (
            "errSecNotAvailable",
            "No keychain is available. You may need to restart your computer."
        ),
        -25292: ("errSecReadOnly", "This keychain cannot be modified."),
        -25293: ("errSecAuthFailed", "The user name or passphrase you entered is not correct."),
        -25294: ("errSecNoSuchKeychain", "The specified keychain could not be found."),
        -25299: ("errSecDuplicateItem", "The specified item already exists in the keychain."),
        -25300: ("errSecItemNotFound", "The specified item could not be found in the keychain."),
        -25301: (
            "errSecBufferTooSmall",
            "There is not enough memory available to use the specified item."
        ),
        -25302: (
            "errSecDataTooLarge",
            "This item contains information which is too large or in a format that cannot be displayed."
        ),
        -25303: ("errSecNoSuchAttr", "The specified attribute does not exist."),
        -25304: (
            "errSecInvalidItemRef",
            "The specified item is no longer valid. It may have been deleted from the keychain."
        ),
        -25306: (
            "errSecNoSuchClass", "The specified item does not appear to be a valid keychain item."
        ),
        -25308: ("errSecInteractionNotAllowed", "User interaction is not allowed."),
        -25309: ("errSecReadOnlyAttr", "The specified attribute could not be modified."),
        -25315: (
            "errSecInteractionRequired",
            "User interaction is required, but is currently not allowed."
        ),
        -25316: ("errSecDataNotAvailable", "The contents of this item cannot be retrieved."),
        -25317: ("errSecDataNotModifiable", "The contents of this item cannot be modified."),
        -26275: ("errSecDecode", "Unable to decode the provided data."),
        -34018: ("errSecMissingEntitlement", "A required entitlement isn't present."),
    ]
}
