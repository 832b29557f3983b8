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
// compile. nonisolated(unsafe): immutable NSNumber constants are safe to share.
nonisolated(unsafe) public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
nonisolated(unsafe) public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)
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
nonisolated(unsafe) public let kCFAllocatorDefault: CFAllocator! = CFAllocator()

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
