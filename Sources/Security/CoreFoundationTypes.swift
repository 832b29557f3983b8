// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's C names: SecItemAdd, CFErrorGetCode, … — the point of this module.)
import Foundation
import Keychain

// The CoreFoundation names Apple keychain code is written against. On Linux, Foundation's
// toll-free counterparts stand in for them, so `q as CFDictionary`, `kSecClass as String`,
// `item as? Data` and `item as? [String: Any]` compile and behave as on Apple platforms.

/// Mirrors `CFTypeRef`: any object, as a `SecItem…` result is.
public typealias CFTypeRef = AnyObject
/// Mirrors `CFDictionary`: Foundation's `NSDictionary`, a `SecItem…` query or attribute set.
public typealias CFDictionary = NSDictionary
/// Mirrors `CFMutableDictionary`: Foundation's `NSMutableDictionary`.
public typealias CFMutableDictionary = NSMutableDictionary
/// Mirrors `CFArray`: Foundation's `NSArray`, a `kSecMatchLimitAll` result.
public typealias CFArray = NSArray
/// Mirrors `CFString`: Foundation's `NSString`, the type of every `kSec…` constant.
public typealias CFString = NSString
/// Mirrors `CFData`: Foundation's `NSData`, a secret or a persistent reference.
public typealias CFData = NSData
/// Mirrors `CFDate`: Foundation's `NSDate`, an item's creation or modification date.
public typealias CFDate = NSDate
/// Mirrors `CFBoolean`: an `NSNumber` holding a `Bool` (`kCFBooleanTrue`, `kCFBooleanFalse`).
public typealias CFBoolean = NSNumber
/// Mirrors `CFNumber`: Foundation's `NSNumber` (`kSecAttrPort`, a numeric `kSecMatchLimit`).
public typealias CFNumber = NSNumber
/// Mirrors `OSStatus` (MacTypes.h): the `Int32` status every `SecItem…` call returns.
public typealias OSStatus = Int32

// Implicitly unwrapped, as Apple declares them, so both `kCFBooleanTrue` and `kCFBooleanTrue!`
// compile.
/// Mirrors `kCFBooleanTrue`: `true` as an `NSNumber`.
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
/// Mirrors `kCFBooleanFalse`: `false` as an `NSNumber`.
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
/// Mirrors `CFTypeID`: the number that identifies a Core Foundation type.
public typealias CFTypeID = UInt
/// Mirrors `CFIndex`: a signed count or index (what `CFErrorGetCode` returns).
public typealias CFIndex = Int
/// Mirrors `CFOptionFlags`: a bit set of options.
public typealias CFOptionFlags = UInt
/// Mirrors `CFStringRef`, the C name of `CFString`.
public typealias CFStringRef = CFString
/// Mirrors `CFNumberRef`, the C name of `CFNumber`.
public typealias CFNumberRef = CFNumber
/// Mirrors `CFDataRef`, the C name of `CFData`.
public typealias CFDataRef = CFData
/// Mirrors `CFDictionaryRef`, the C name of `CFDictionary`.
public typealias CFDictionaryRef = CFDictionary
/// Mirrors `CFArrayRef`, the C name of `CFArray`.
public typealias CFArrayRef = CFArray
/// Mirrors `CFErrorDomain`: the name of an error's domain, as `CFErrorGetDomain` returns it.
public typealias CFErrorDomain = CFString

/// Mirrors `CFAllocator`: Keepsake allocates with Swift and libsodium; the allocator argument is
/// accepted and ignored, as Apple code passes `kCFAllocatorDefault` or `nil`.
public final class CFAllocator: @unchecked Sendable {
    // Sendable: no state.
    fileprivate init() {}
}
/// Mirrors `kCFAllocatorDefault`.
public let kCFAllocatorDefault: CFAllocator! = CFAllocator()

/// Mirrors `CFError` (toll-free `NSError`), so `Unmanaged<CFError>?` out-parameters compile.
public typealias CFError = NSError
/// Mirrors `CFErrorRef`, the C name of `CFError`.
public typealias CFErrorRef = CFError

/// Mirrors `CFErrorGetDomain`.
public func CFErrorGetDomain(_ error: CFError!) -> CFErrorDomain! { error.domain as NSString }
/// Mirrors `CFErrorGetCode`.
public func CFErrorGetCode(_ error: CFError!) -> CFIndex { error.code }
/// Mirrors `CFErrorCopyUserInfo`.
public func CFErrorCopyUserInfo(_ error: CFError!) -> CFDictionary! {
    error.userInfo as NSDictionary
}
/// Mirrors `CFErrorCopyDescription`.
public func CFErrorCopyDescription(_ error: CFError!) -> CFString! {
    error.localizedDescription as NSString
}

// MARK: - Bundle keys

// The Info.plist keys wrappers read their default service name with
// (`Bundle.main.infoDictionary?[kCFBundleIdentifierKey as String]`).
/// Mirrors `kCFBundleIdentifierKey`.
nonisolated(unsafe) public let kCFBundleIdentifierKey: CFString! = "CFBundleIdentifier"
/// Mirrors `kCFBundleNameKey`.
nonisolated(unsafe) public let kCFBundleNameKey: CFString! = "CFBundleName"
/// Mirrors `kCFBundleVersionKey`.
nonisolated(unsafe) public let kCFBundleVersionKey: CFString! = "CFBundleVersion"

// MARK: - NSMutableDictionary as Apple declares it

extension NSMutableDictionary {
    /// Apple's `setObject(_:forKey:)` takes an `NSCopying` key (`forKey: kSecClass as!
    /// NSCopying`); Foundation on Linux takes an `AnyHashable`. Every CF string key is both.
    public func setObject(_ anObject: Any, forKey aKey: any NSCopying) {
        guard let key = aKey as? AnyHashable else {
            preconditionFailure("a dictionary key must be hashable: \(type(of: aKey))")
        }
        setObject(anObject, forKey: key)
    }

    /// Apple's key-value coding write on a dictionary (`query.setValue(kCFBooleanTrue, forKey:
    /// kSecReturnData as String)`): sets the object under `key`, or removes it for nil.
    /// (Foundation on Linux has the read, `value(forKey:)`, but not this.)
    public func setValue(_ value: Any?, forKey key: String) {
        if let value {
            setObject(value, forKey: key as NSString)
        } else {
            removeObject(forKey: key)
        }
    }
}

// MARK: - CF string keys in [AnyHashable: Any]

/// On Apple platforms an `NSString` (so a `CFString` constant such as `kSecAttrAccount`) in an
/// `AnyHashable` is its `String`: `attributes[kSecAttrAccount]` finds the `"acct"` entry of an
/// `[AnyHashable: Any]` result (SwiftKeychainWrapper's `allKeys` reads it so). Foundation on Linux
/// keeps the `NSString`, equal to no `String`; this gives it Apple's behaviour.
// swift-format-ignore: AvoidRetroactiveConformances
extension NSString: @retroactive _HasCustomAnyHashableRepresentation {
    /// The `String` this `NSString` holds, so that it keys an `AnyHashable` dictionary as on Apple
    /// platforms.
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(self as String) }
}
