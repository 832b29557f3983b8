// swift-format-ignore-file: AlwaysUseLowerCamelCase
// (Apple's C names: SecItemAdd, CFErrorGetCode, … — the point of this module.)
import Foundation
import Keychain

// The CoreFoundation names Apple keychain code is written against. On Linux, Foundation's
// toll-free counterparts stand in for them, so `q as CFDictionary`, `kSecClass as String`,
// `item as? Data` and `item as? [String: Any]` compile and behave as on Apple platforms.

public typealias CFTypeRef = AnyObject
public typealias CFDictionary = NSDictionary
public typealias CFMutableDictionary = NSMutableDictionary
public typealias CFArray = NSArray
public typealias CFString = NSString
public typealias CFData = NSData
public typealias CFDate = NSDate
public typealias CFBoolean = NSNumber
public typealias CFNumber = NSNumber
public typealias OSStatus = Int32

// Implicitly unwrapped, as Apple declares them, so both `kCFBooleanTrue` and `kCFBooleanTrue!`
// compile.
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
public typealias CFTypeID = UInt
public typealias CFIndex = Int
public typealias CFOptionFlags = UInt
public typealias CFStringRef = CFString
public typealias CFNumberRef = CFNumber
public typealias CFDataRef = CFData
public typealias CFDictionaryRef = CFDictionary
public typealias CFArrayRef = CFArray
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
    public func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(self as String) }
}
