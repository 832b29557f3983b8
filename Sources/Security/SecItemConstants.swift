import Foundation
import Keychain

// Apple's `kSec…` constants with Apple's raw values (so archived queries and logs read the same).
// nonisolated(unsafe): immutable NSString constants are safe to share across threads.

// Item class
/// The key of an item's class, required in every `SecItem…` dictionary (missing or not a string:
/// `errSecParam`).
nonisolated(unsafe) public let kSecClass: CFString = "class"
/// Class value: a generic password, keyed by access group, service, account and synchronizable.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
/// Class value: an internet password, keyed by access group, account, server, port, path,
/// protocol, authentication type, security domain and synchronizable.
nonisolated(unsafe) public let kSecClassInternetPassword: CFString = "inet"
/// Class value: a certificate. Not kept: adding one is `errSecUnimplemented`, and finding, updating
/// or deleting one answers `errSecItemNotFound`.
nonisolated(unsafe) public let kSecClassCertificate: CFString = "cert"
/// Class value: a cryptographic key. Not kept: adding one is `errSecUnimplemented`, and finding,
/// updating or deleting one answers `errSecItemNotFound`.
nonisolated(unsafe) public let kSecClassKey: CFString = "keys"
/// Class value: an identity (a certificate with its private key). Not kept: adding one is
/// `errSecUnimplemented`, and finding, updating or deleting one answers `errSecItemNotFound`.
nonisolated(unsafe) public let kSecClassIdentity: CFString = "idnt"

// Attributes
/// A generic password's service, part of its primary key: a string, or `Data` holding UTF-8
/// (returned as `Data` then). On an internet password: `errSecNoSuchAttr`.
nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
/// The item's account, part of its primary key: a string, or `Data` holding UTF-8 (returned as
/// `Data` then).
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
/// The item's access group: one the app is entitled to (its id, `KEEPSAKE_ACCESS_GROUPS`), else
/// `errSecMissingEntitlement`. Absent on add: the app's first group; in a query: all of them.
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
/// Whether the item syncs with the cloud account (`KeychainSync`): a boolean, or in a query
/// `kSecAttrSynchronizableAny`. Absent from a query, only items that do not sync match.
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
/// `kSecAttrSynchronizable` in a query: items that sync and items that do not. On add:
/// `errSecParam`.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = "syna"
/// The item's data-protection class, a `kSecAttrAccessible…` value (absent on add:
/// `…WhenUnlocked`): which device class key seals it. Not with `kSecAttrAccessControl`.
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
/// The item's user-visible label, also its label in the Secret Service: a string, or `Data`
/// holding UTF-8 (returned as `Data` then).
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"
/// The item's comment, a string (or `Data` holding UTF-8).
nonisolated(unsafe) public let kSecAttrComment: CFString = "icmt"
/// The user-visible kind of the item (Apple's example: "Disk image password"), a string.
nonisolated(unsafe) public let kSecAttrDescription: CFString = "desc"
/// A generic password's own bytes, as the app defines them: `Data` (a string is taken as its
/// UTF-8). On an internet password: `errSecNoSuchAttr`.
nonisolated(unsafe) public let kSecAttrGeneric: CFString = "gena"
/// When the item was added: set by the Keychain and returned with the attributes; given in a
/// dictionary, `errSecParam`.
nonisolated(unsafe) public let kSecAttrCreationDate: CFString = "cdat"
/// When the item last changed: set by the Keychain and returned with the attributes; given in a
/// dictionary, `errSecParam`.
nonisolated(unsafe) public let kSecAttrModificationDate: CFString = "mdat"
/// Apple: the item's creator, a four-character code as a number (`'aCrt'` is 0x61437274).
nonisolated(unsafe) public let kSecAttrCreator: CFString = "crtr"
/// Apple: the item's type, a four-character code. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrType: CFString = "type"
/// Apple: whether the item is hidden from the user. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrIsInvisible: CFString = "invi"
/// Apple: the item is a placeholder with no valid password. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrIsNegative: CFString = "nega"
/// The item's `SecAccessControl` (`SecAccessControlCreateWithFlags`): its class and the
/// constraints enforced at each use of its secret. With `kSecAttrAccessible` too: `errSecParam`.
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "accc"

// Accessibility values
/// Class value: readable only while the device is unlocked (its class key is dropped at lock).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Class value: readable from the first unlock after a reboot until the next reboot.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Class value: readable while unlocked, only while a passcode is set; never leaves the device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Class value: as `…WhenUnlocked`, and never leaves the device (cannot be synchronizable).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Class value: as `…AfterFirstUnlock`, and never leaves the device (cannot be synchronizable).
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Deprecated by Apple, still accepted: stored as `AfterFirstUnlock` (see docs/keychain.md, "Apple keys and classes").
nonisolated(unsafe) public let kSecAttrAccessibleAlways: CFString = "dk"
/// Deprecated by Apple, still accepted: stored as `AfterFirstUnlockThisDeviceOnly`.
nonisolated(unsafe) public let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// Values, returns, matching, use
/// The item's secret, `Data` of at most 64 KiB. Ignored in a query: items are never matched by
/// their secret.
nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
/// Apple: the item as a reference object. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecValueRef: CFString = "v_Ref"
/// An item's persistent reference (`KSPR1:` and the item's random id, as `Data`): in a query,
/// exactly that item; it survives restarts and never names an item added later.
nonisolated(unsafe) public let kSecValuePersistentRef: CFString = "v_PersistentRef"
/// Return each item's secret (with `SecItemAdd`, the data just given).
nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
/// Return each item's attributes: a dictionary under Apple's keys.
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
/// Apple: return item references. Accepted, and none is returned: passwords have none on iOS
/// either.
nonisolated(unsafe) public let kSecReturnRef: CFString = "r_Ref"
/// Return each item's persistent reference (`kSecValuePersistentRef`).
nonisolated(unsafe) public let kSecReturnPersistentRef: CFString = "r_PersistentRef"
/// How many items a query returns: `kSecMatchLimitOne` (the default), `kSecMatchLimitAll`, or a
/// number n ≥ 1 (up to n items, as an array).
nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
/// `kSecMatchLimit` value: the first matching item, returned alone.
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// `kSecMatchLimit` value: every matching item, returned as an array.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"
/// Apple: match strings ignoring case. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Apple (macOS): use the data-protection keychain. Accepted: Keepsake's keychain always is one.
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"
/// The `LAContext` whose credentials (the device passcode, an application password) open items
/// with access control; anything else is `errSecParam`.
nonisolated(unsafe) public let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
/// What a call does about items needing a credential the context lacks: `…UIAllow`, `…UIFail` or
/// `…UISkip`. No dialog is ever shown.
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = "u_AuthUI"
/// `kSecUseAuthenticationUI` value: Apple may ask the user; here, with no dialog to show, such an
/// item answers `errSecInteractionNotAllowed`.
nonisolated(unsafe) public let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
/// `kSecUseAuthenticationUI` value: never ask; such an item answers `errSecInteractionNotAllowed`.
nonisolated(unsafe) public let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
/// `kSecUseAuthenticationUI` value: leave items needing a credential out of a query's results.
nonisolated(unsafe) public let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// Apple's deprecated boolean form of `…UIFail`. Accepted as a boolean; no dialog is ever shown.
nonisolated(unsafe) public let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
/// Apple: the text of the authentication dialog. Accepted and unused: there is no dialog.
nonisolated(unsafe) public let kSecUseOperationPrompt: CFString = "u_OpPrompt"
/// Apple: search only the given items. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecMatchItemList: CFString = "m_ItemList"
/// Apple (macOS): the keychains to search. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecMatchSearchList: CFString = "m_SearchList"
/// An internet password's security domain (its authentication realm), part of its primary key.
nonisolated(unsafe) public let kSecAttrSecurityDomain: CFString = "sdmn"
/// An internet password's server (a domain name or IP address), part of its primary key. On a
/// generic password, this and the other internet attributes are `errSecNoSuchAttr`.
nonisolated(unsafe) public let kSecAttrServer: CFString = "srvr"
/// An internet password's protocol, a `kSecAttrProtocol…` code, stored as given.
nonisolated(unsafe) public let kSecAttrProtocol: CFString = "ptcl"
/// An internet password's authentication scheme, a `kSecAttrAuthenticationType…` code.
nonisolated(unsafe) public let kSecAttrAuthenticationType: CFString = "atyp"
/// An internet password's port: a number 0…65535 (anything else: `errSecParam`; absent: 0).
nonisolated(unsafe) public let kSecAttrPort: CFString = "port"
/// An internet password's path (a URL's path part), part of its primary key.
nonisolated(unsafe) public let kSecAttrPath: CFString = "path"
/// Apple: a key's class (public, private, symmetric). Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = "kcls"
/// Apple: a key's label for lookup (a public key's hash). Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrApplicationLabel: CFString = "klbl"
/// Apple: a key's application tag. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrApplicationTag: CFString = "atag"
/// Apple: a key's algorithm. The same key as `kSecAttrType`, so `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrKeyType: CFString = "type"
/// Apple: a key's size in bits. Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = "bsiz"
/// Apple: the token holding a key (the Secure Enclave). Not implemented: `errSecUnimplemented`.
nonisolated(unsafe) public let kSecAttrTokenID: CFString = "tkid"
/// Apple: `kSecAttrTokenID`'s Secure Enclave value (`kSecAttrTokenID` is `errSecUnimplemented`).
nonisolated(unsafe) public let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"

// Internet-password protocol and authentication-type values (Apple's four-character codes).
/// `kSecAttrProtocol` value: HTTP.
nonisolated(unsafe) public let kSecAttrProtocolHTTP: CFString = "http"
/// `kSecAttrProtocol` value: HTTPS (HTTP over TLS).
nonisolated(unsafe) public let kSecAttrProtocolHTTPS: CFString = "htps"
/// `kSecAttrProtocol` value: FTP.
nonisolated(unsafe) public let kSecAttrProtocolFTP: CFString = "ftp "
/// `kSecAttrProtocol` value: FTPS (FTP over TLS).
nonisolated(unsafe) public let kSecAttrProtocolFTPS: CFString = "ftps"
/// `kSecAttrProtocol` value: SSH.
nonisolated(unsafe) public let kSecAttrProtocolSSH: CFString = "ssh "
/// `kSecAttrProtocol` value: SMTP.
nonisolated(unsafe) public let kSecAttrProtocolSMTP: CFString = "smtp"
/// `kSecAttrProtocol` value: IMAP.
nonisolated(unsafe) public let kSecAttrProtocolIMAP: CFString = "imap"
/// `kSecAttrProtocol` value: IMAPS (IMAP over TLS).
nonisolated(unsafe) public let kSecAttrProtocolIMAPS: CFString = "imps"
/// `kSecAttrProtocol` value: POP3.
nonisolated(unsafe) public let kSecAttrProtocolPOP3: CFString = "pop3"
/// `kSecAttrProtocol` value: POP3S (POP3 over TLS).
nonisolated(unsafe) public let kSecAttrProtocolPOP3S: CFString = "pops"
/// `kSecAttrProtocol` value: LDAP.
nonisolated(unsafe) public let kSecAttrProtocolLDAP: CFString = "ldap"
/// `kSecAttrProtocol` value: LDAPS (LDAP over TLS).
nonisolated(unsafe) public let kSecAttrProtocolLDAPS: CFString = "ldps"
/// `kSecAttrProtocol` value: Telnet.
nonisolated(unsafe) public let kSecAttrProtocolTelnet: CFString = "teln"
/// `kSecAttrProtocol` value: Telnet over TLS.
nonisolated(unsafe) public let kSecAttrProtocolTelnetS: CFString = "tels"
/// `kSecAttrProtocol` value: an FTP account.
nonisolated(unsafe) public let kSecAttrProtocolFTPAccount: CFString = "ftpa"
/// `kSecAttrProtocol` value: an FTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolFTPProxy: CFString = "ftpx"
/// `kSecAttrProtocol` value: an HTTP proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPProxy: CFString = "htpx"
/// `kSecAttrProtocol` value: an HTTPS proxy.
nonisolated(unsafe) public let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
/// `kSecAttrProtocol` value: IRC.
nonisolated(unsafe) public let kSecAttrProtocolIRC: CFString = "irc "
/// `kSecAttrProtocol` value: IRCS (IRC over TLS).
nonisolated(unsafe) public let kSecAttrProtocolIRCS: CFString = "ircs"
/// `kSecAttrProtocol` value: NNTP.
nonisolated(unsafe) public let kSecAttrProtocolNNTP: CFString = "nntp"
/// `kSecAttrProtocol` value: NNTPS (NNTP over TLS).
nonisolated(unsafe) public let kSecAttrProtocolNNTPS: CFString = "ntps"
/// `kSecAttrProtocol` value: AFP (Apple Filing Protocol).
nonisolated(unsafe) public let kSecAttrProtocolAFP: CFString = "afp "
/// `kSecAttrProtocol` value: AppleTalk.
nonisolated(unsafe) public let kSecAttrProtocolAppleTalk: CFString = "atlk"
/// `kSecAttrProtocol` value: SMB.
nonisolated(unsafe) public let kSecAttrProtocolSMB: CFString = "smb "
/// `kSecAttrProtocol` value: CIFS (Common Internet File System).
nonisolated(unsafe) public let kSecAttrProtocolCIFS: CFString = "cifs"
/// `kSecAttrProtocol` value: RTSP (Real Time Streaming Protocol).
nonisolated(unsafe) public let kSecAttrProtocolRTSP: CFString = "rtsp"
/// `kSecAttrProtocol` value: an RTSP proxy.
nonisolated(unsafe) public let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
/// `kSecAttrProtocol` value: DAAP (Digital Audio Access Protocol).
nonisolated(unsafe) public let kSecAttrProtocolDAAP: CFString = "daap"
/// `kSecAttrProtocol` value: EPPC (Remote Apple Events).
nonisolated(unsafe) public let kSecAttrProtocolEPPC: CFString = "eppc"
/// `kSecAttrProtocol` value: IPP (Internet Printing Protocol).
nonisolated(unsafe) public let kSecAttrProtocolIPP: CFString = "ipp "
/// `kSecAttrProtocol` value: SOCKS.
nonisolated(unsafe) public let kSecAttrProtocolSOCKS: CFString = "sox "
/// `kSecAttrProtocol` value: Subversion.
nonisolated(unsafe) public let kSecAttrProtocolSVN: CFString = "svn "
/// `kSecAttrAuthenticationType` value: the default scheme.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDefault: CFString = "dflt"
/// `kSecAttrAuthenticationType` value: HTTP Basic.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
/// `kSecAttrAuthenticationType` value: HTTP Digest.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
/// `kSecAttrAuthenticationType` value: an HTML form.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
/// `kSecAttrAuthenticationType` value: Windows NTLM.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
/// `kSecAttrAuthenticationType` value: Microsoft Network's default.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeMSN: CFString = "msna"
/// `kSecAttrAuthenticationType` value: Distributed Password Authentication.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
/// `kSecAttrAuthenticationType` value: Remote Password Authentication.
nonisolated(unsafe) public let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"

// Status codes: Apple's names and numbers exactly (SecBase.h, MacErrors.h).
/// Mirrors `noErr` (MacTypes.h): 0.
public let noErr: OSStatus = 0
/// No error: what every `SecItem…` call that did what was asked returns.
public let errSecSuccess: OSStatus = 0
/// Function or operation not implemented: the Apple keys and classes Keepsake refuses rather than
/// ignores (`docs/keychain.md`, "Apple keys and classes").
public let errSecUnimplemented: OSStatus = -4
/// The disk is full.
public let errSecDiskFull: OSStatus = -34
/// I/O error.
public let errSecIO: OSStatus = -36
/// File already open with write permission.
public let errSecOpWr: OSStatus = -49
/// One or more parameters were not valid: a wrong value type, a key not allowed in that call, a
/// secret over 64 KiB, contradictory access-control flags.
public let errSecParam: OSStatus = -50
/// Write permissions error.
public let errSecWrPerm: OSStatus = -61
/// Failed to allocate memory.
public let errSecAllocate: OSStatus = -108
/// The user canceled the operation.
public let errSecUserCanceled: OSStatus = -128
/// Bad parameter or invalid state for operation.
public let errSecBadReq: OSStatus = -909
/// An internal component failed.
public let errSecInternalComponent: OSStatus = -2070
/// An unknown Core Foundation error.
public let errSecCoreFoundationUnknown: OSStatus = -4960
/// A required entitlement is not present: an access group the app is not entitled to.
public let errSecMissingEntitlement: OSStatus = -34018
/// The client is restricted and may not perform this operation.
public let errSecRestrictedAPI: OSStatus = -34020
/// No keychain is available: the Secret Service could not be reached or did not answer within its
/// bound, or the device's storage could not be used.
public let errSecNotAvailable: OSStatus = -25291
/// This keychain cannot be modified.
public let errSecReadOnly: OSStatus = -25292
/// Authentication failed: a wrong device passcode or application password, an access constraint
/// nothing on Linux meets (biometry), or a device disabled by its guess limit.
public let errSecAuthFailed: OSStatus = -25293
/// The specified keychain could not be found.
public let errSecNoSuchKeychain: OSStatus = -25294
/// The specified keychain is not a valid keychain file.
public let errSecInvalidKeychain: OSStatus = -25295
/// A keychain with the same name already exists.
public let errSecDuplicateKeychain: OSStatus = -25296
/// The specified callback function is already installed.
public let errSecDuplicateCallback: OSStatus = -25297
/// The specified callback function is not valid.
public let errSecInvalidCallback: OSStatus = -25298
/// An item with this primary key already exists (an add, or an update that would make two).
public let errSecDuplicateItem: OSStatus = -25299
/// The specified item could not be found: nothing matches the query.
public let errSecItemNotFound: OSStatus = -25300
/// Not enough memory available to use the specified item.
public let errSecBufferTooSmall: OSStatus = -25301
/// The item holds information too large or in a format that cannot be displayed.
public let errSecDataTooLarge: OSStatus = -25302
/// The attribute does not exist: an internet attribute on a generic password, or a service or
/// generic attribute on an internet password.
public let errSecNoSuchAttr: OSStatus = -25303
/// The specified item is no longer valid; it may have been deleted from the keychain.
public let errSecInvalidItemRef: OSStatus = -25304
/// Unable to search the current keychain.
public let errSecInvalidSearchRef: OSStatus = -25305
/// The specified item does not appear to be a valid keychain item.
public let errSecNoSuchClass: OSStatus = -25306
/// A default keychain could not be found.
public let errSecNoDefaultKeychain: OSStatus = -25307
/// User interaction is not allowed: the device is locked for the item's class, the Secret
/// Service collection is locked or wants a prompt, or a credential the item needs was not given.
public let errSecInteractionNotAllowed: OSStatus = -25308
/// The specified attribute could not be modified.
public let errSecReadOnlyAttr: OSStatus = -25309
/// The keychain was created by a different version of the system software and cannot be opened.
public let errSecWrongSecVersion: OSStatus = -25310
/// The item specifies a key size that is too large or too small.
public let errSecKeySizeNotAllowed: OSStatus = -25311
/// A required component (data storage module) could not be loaded.
public let errSecNoStorageModule: OSStatus = -25312
/// A required component (certificate module) could not be loaded.
public let errSecNoCertificateModule: OSStatus = -25313
/// A required component (policy module) could not be loaded.
public let errSecNoPolicyModule: OSStatus = -25314
/// User interaction is required, but is currently not allowed.
public let errSecInteractionRequired: OSStatus = -25315
/// The contents of this item cannot be retrieved.
public let errSecDataNotAvailable: OSStatus = -25316
/// The contents of this item cannot be modified.
public let errSecDataNotModifiable: OSStatus = -25317
/// Certificates needed to validate this certificate cannot be found.
public let errSecCreateChainFailed: OSStatus = -25318
/// The specified preferences domain is not valid.
public let errSecInvalidPrefsDomain: OSStatus = -25319
/// No user interface can be shown: the system is in a dark wake.
public let errSecInDarkWake: OSStatus = -25320
/// The access control list is not in standard (simple) form.
public let errSecACLNotSimple: OSStatus = -25240
/// The specified policy cannot be found.
public let errSecPolicyNotFound: OSStatus = -25241
/// The specified trust setting is invalid.
public let errSecInvalidTrustSetting: OSStatus = -25242
/// The specified item has no access control.
public let errSecNoAccessForItem: OSStatus = -25243
/// An invalid attempt to change the owner of this item.
public let errSecInvalidOwnerEdit: OSStatus = -25244
/// No trust results are available.
public let errSecTrustNotAvailable: OSStatus = -25245
/// Import/export format unsupported.
public let errSecUnsupportedFormat: OSStatus = -25256
/// Unknown format in import.
public let errSecUnknownFormat: OSStatus = -25257
/// Key material must be wrapped for export.
public let errSecKeyIsSensitive: OSStatus = -25258
/// An attempt was made to import multiple private keys.
public let errSecMultiplePrivKeys: OSStatus = -25259
/// A passphrase is required for import/export.
public let errSecPassphraseRequired: OSStatus = -25260
/// The password reference was invalid.
public let errSecInvalidPasswordRef: OSStatus = -25261
/// The trust settings record was corrupted.
public let errSecInvalidTrustSettings: OSStatus = -25262
/// No trust settings were found.
public let errSecNoTrustSettings: OSStatus = -25263
/// MAC verification failed during PKCS #12 import (a wrong password?).
public let errSecPkcs12VerifyFailure: OSStatus = -25264
/// A certificate was not signed by its proposed parent.
public let errSecNotSigner: OSStatus = -26267
/// Unable to decode the provided data: a stored item (or the device's state) that does not decode
/// or authenticate, or an item whose record does not match its index.
public let errSecDecode: OSStatus = -26275
/// The required service is not available.
public let errSecServiceNotAvailable: OSStatus = -67585
/// The client ID is not correct.
public let errSecInsufficientClientID: OSStatus = -67586
/// A device reset has occurred.
public let errSecDeviceReset: OSStatus = -67587
/// A device failure has occurred.
public let errSecDeviceFailed: OSStatus = -67588
/// A cryptographic verification failure has occurred.
public let errSecVerifyFailed: OSStatus = -67808
/// The trust policy was not trusted.
public let errSecNotTrusted: OSStatus = -67843
