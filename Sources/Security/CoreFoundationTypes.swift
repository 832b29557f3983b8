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
