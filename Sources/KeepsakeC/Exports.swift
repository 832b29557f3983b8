import AppWiring
import BlockStore
import CloudAccount
import Device
import Foundation
import Keychain
import RecoveryHint
import Platform
import Sealing

#if canImport(Glibc)
    import Glibc
#endif

// The C ABI (include/keepsake.h, docs/c-abi.md): every function returns 0 or an OSStatus-style
// code, with a message the caller frees when it passed where to put one; nothing throws across.

/// The ABI's version: a caller built against another refuses to go on.
@_cdecl("keepsake_abi_version")
public func keepsake_abi_version() -> UInt32 { 1 }

/// Opens `app_id`'s app on this user's device. `options_json` (or NULL): an object with any of
/// `deviceDirectory`, `container`, `cloud`, `cloudCA`, `escrow`, `counter` (as the command
/// line's `--device-dir`, … take them).
@_cdecl("keepsake_app_open")
public func keepsake_app_open(
    _ appID: UnsafePointer<CChar>?, _ options: UnsafePointer<CChar>?,
    _ out: UnsafeMutablePointer<OpaquePointer?>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        guard let out else { throw CFailure(-50, "out is NULL") }
        out.pointee = nil
        var opening = AppOptions(appID: try required(appID, "app_id"))
        if let json = try string(options, "options_json", optional: true) {
            let given: [String: Any]
            do { given = try StrictJSON.object(Data(json.utf8)) } catch {
                throw CFailure(-50, "options_json: \(error)")
            }
            for (key, value) in given.sorted(by: { $0.key < $1.key }) {
                guard let text = value as? String else {
                    throw CFailure(-50, "options_json: unknown option or not a string: \(key)")
                }
                // An empty path is no path: never the working directory.
                guard !text.isEmpty else { throw CFailure(-50, "options_json: \(key) is empty") }
                try opening.set(key, text)
            }
        }
        out.pointee = Handles.add(try OpenApp(opening))
    }
}

extension AppOptions {
    /// Sets the option `name` of `options_json` (named as the command line's `--device-dir`, …
    /// are, in camel case) to `text`.
    fileprivate mutating func set(_ name: String, _ text: String) throws(CFailure) {
        switch name {
        case "deviceDirectory": deviceDirectory = URL(fileURLWithPath: text)
        case "container": container = URL(fileURLWithPath: text)
        case "cloud": cloud = text
        case "cloudCA": cloudCA = text
        case "escrow":
            guard let url = URL(string: text), EscrowConfiguration(url: url) != nil else {
                throw CFailure(
                    -50,
                    "options_json: escrow takes the escrow's address: https://… (plain http at 127.0.0.1 only)"
                )
            }
            escrow = url
        case "counter":
            if text == "none" {
                counter = .none
            } else if let url = URL(string: text), let configuration = EscrowConfiguration(url: url)
            {
                counter = .at(configuration)
            } else {
                throw CFailure(
                    -50,
                    "options_json: counter takes the guess counter's address: unix:/run/keepsake/counter.sock (or none)"
                )
            }
        default: throw CFailure(-50, "options_json: unknown option or not a string: \(name)")
        }
    }
}

/// Closes a handle; using it afterwards is refused (errSecParam), never a crash.
@_cdecl("keepsake_app_close")
public func keepsake_app_close(_ app: OpaquePointer?) -> Int32 {
    Handles.close(app) ? 0 : -50
}

/// Frees a string the library returned.
@_cdecl("keepsake_string_free")
public func keepsake_string_free(_ text: UnsafeMutablePointer<CChar>?) { free(text) }

/// Wipes and frees a secret the library returned.
@_cdecl("keepsake_secret_free")
public func keepsake_secret_free(_ bytes: UnsafeMutablePointer<UInt8>?, _ length: Int) {
    guard let bytes else { return }
    if length > 0 { explicit_bzero(bytes, length) }
    free(bytes)
}

// MARK: - Generic passwords

/// The query of `service` and `account` and `synchronizable` (0 no, 1 yes, 2 any). NULL means
/// "any" only where the header says so (`nullMeansAny`); elsewhere it is errSecParam. An empty
/// string is a name like any other, never "any".
private func query(
    _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?, _ synchronizable: Int32,
    nullMeansAny: (service: Bool, account: Bool)
) throws(CFailure) -> GenericPasswordQuery {
    let match: SynchronizableMatch
    switch synchronizable {
    case 0: match = .no
    case 1: match = .yes
    case 2: match = .any
    default: throw CFailure(-50, "synchronizable is 0 (no), 1 (yes) or 2 (any)")
    }
    return GenericPasswordQuery(
        service: nullMeansAny.service
            ? try string(service, "service", optional: true) : try required(service, "service"),
        account: nullMeansAny.account
            ? try string(account, "account", optional: true) : try required(account, "account"),
        synchronizable: match)
}

/// Adds a generic password. `accessible`: a class's command-line name (`after-first-unlock`,
/// `when-unlocked-this-device-only`, …) or NULL for `when-unlocked`.
@_cdecl("keepsake_password_add")
public func keepsake_password_add(
    _ app: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
    _ secret: UnsafePointer<UInt8>?, _ length: Int, _ accessible: UnsafePointer<CChar>?,
    _ synchronizable: Int32, _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let name = try string(accessible, "accessible", optional: true)
        guard let accessibility = name.map(Accessibility.init(commandLineName:)) ?? .whenUnlocked
        else { throw CFailure(-50, "accessible: not a class name") }
        guard synchronizable == 0 || synchronizable == 1 else {
            throw CFailure(-50, "synchronizable is 0 or 1 for an add")
        }
        let attributes = GenericPasswordAttributes(
            service: try required(service, "service"), account: try required(account, "account"),
            synchronizable: synchronizable == 1, accessible: accessibility)
        try withBytes(secret, length, "secret") { data in
            try open.keychain.add(attributes, data: data)
        }
    }
}

/// The secret of the generic password `service` / `account` (neither may be NULL); freed with
/// `keepsake_secret_free`.
@_cdecl("keepsake_password_get")
public func keepsake_password_get(
    _ app: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
    _ synchronizable: Int32, _ secret: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
    _ length: UnsafeMutablePointer<Int>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        var data = try open.keychain.data(
            matching: try query(
                service, account, synchronizable, nullMeansAny: (service: false, account: false)))
        try secretOut(&data, secret, length)
    }
}

/// Replaces the secret of the generic password `service` / `account` (neither may be NULL).
@_cdecl("keepsake_password_update")
public func keepsake_password_update(
    _ app: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
    _ synchronizable: Int32, _ secret: UnsafePointer<UInt8>?, _ length: Int,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let query = try query(
            service, account, synchronizable, nullMeansAny: (service: false, account: false))
        try withBytes(secret, length, "secret") { data in
            try open.keychain.update(matching: query, with: GenericPasswordChanges(data: data))
        }
    }
}

/// Deletes the generic password `service` / `account` (`account` NULL: every account of
/// `service`; `service` may not be NULL).
@_cdecl("keepsake_password_delete")
public func keepsake_password_delete(
    _ app: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
    _ synchronizable: Int32, _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        try open.keychain.delete(
            matching: try query(
                service, account, synchronizable, nullMeansAny: (service: false, account: true)))
    }
}

/// The attributes of every generic password matching, as a JSON array (never a secret); an
/// empty array when none matches. `service` and `account` NULL: any.
@_cdecl("keepsake_password_search")
public func keepsake_password_search(
    _ app: OpaquePointer?, _ service: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
    _ synchronizable: Int32, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        guard let json else { throw CFailure(-50, "json is NULL") }
        let items = try open.keychain.listing(
            try query(
                service, account, synchronizable, nullMeansAny: (service: true, account: true)))
        let array = items.map(\.attributes.jsonObject)
        let data = try JSONSerialization.data(withJSONObject: array, options: [.sortedKeys])
        json.pointee = cString(String(decoding: data, as: UTF8.self))
    }
}

// MARK: - The recovery hint (the plugin's semantics: never fails a get)

/// The hint as JSON (`{"lastAuthenticatorId":…,"lastWallet":…,"lastLoginAt":…}`), or `{}`
/// when there is none or it cannot be read; NULL only for a handle that is not open.
@_cdecl("keepsake_hint_get")
public func keepsake_hint_get(_ app: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    guard let open = try? Handles.app(app) else { return nil }
    let hint = open.hints.get()
    // `{}` when there is none, as the seed plugin's native sides answer (never `null`: its
    // callers read `hint.lastAuthenticatorId` straight off the answer).
    return cString(hint.isEmpty ? "{}" : String(decoding: hint.json(), as: UTF8.self))
}

/// Merges the fields `json` gives into the hint; an empty payload is refused (errSecParam).
@_cdecl("keepsake_hint_set")
public func keepsake_hint_set(
    _ app: OpaquePointer?, _ json: UnsafePointer<CChar>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let changes = try RecoveryHint.decode(json: Data(try required(json, "json").utf8))
        guard !changes.isEmpty else {
            throw CFailure(-50, "Refusing to persist an empty recovery hint")
        }
        guard let service = open.hints.service else {
            throw CFailure(-25291, "the hint stores could not be opened")
        }
        _ = try service.update(changes)
    }
}

/// Clears the hint in every store.
@_cdecl("keepsake_hint_clear")
public func keepsake_hint_clear(
    _ app: OpaquePointer?, _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) { try Handles.app(app).hints.clear() }
}

// MARK: - The lock screen

/// `keepsake lockscreen status` as JSON.
@_cdecl("keepsake_lockscreen_status")
public func keepsake_lockscreen_status(
    _ app: OpaquePointer?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        guard let json else { throw CFailure(-50, "json is NULL") }
        let status = try open.device.status()
        var fields: [String: Any] = [
            "kind": status.kind.rawValue, "state": status.state.rawValue,
            "e2eeCapable": status.isEndToEndEncryptionCapable,
            "guessLimit": status.guessLimit, "failedAttempts": status.failedAttempts,
        ]
        if let countedIn = status.countedIn { fields["countedIn"] = countedIn }
        let data = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        json.pointee = cString(String(decoding: data, as: UTF8.self))
    }
}

/// Unlocks with `passcode` (bytes, as typed). `notice` (when given) receives what the owner is
/// to be told of wrong passcodes since the last unlock, or NULL.
@_cdecl("keepsake_lockscreen_unlock")
public func keepsake_lockscreen_unlock(
    _ app: OpaquePointer?, _ passcode: UnsafePointer<UInt8>?, _ length: Int,
    _ notice: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    notice?.pointee = nil
    return boundary(error) {
        let open = try Handles.app(app)
        guard length >= 0, length <= 1024 else {
            throw CFailure(-50, "a passcode of at most 1 KiB")
        }
        guard length == 0 || passcode != nil else { throw CFailure(-50, "passcode is NULL") }
        let secret = SecureBytes(count: length) { out in
            if length > 0 {
                out.copyMemory(from: UnsafeRawBufferPointer(start: passcode, count: length))
            }
        }
        let report = try open.account.unlockReporting(passcode: secret)
        // The device's own wrong passcodes, then the account escrow's wrong claims: one line each.
        let lines = [report.wrongPasscodes, report.escrowWrongClaims].compactMap { $0?.notice }
        if !lines.isEmpty { notice?.pointee = cString(lines.joined(separator: "\n")) }
    }
}

// MARK: - Block Store

@_cdecl("keepsake_blockstore_store")
public func keepsake_blockstore_store(
    _ app: OpaquePointer?, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<UInt8>?,
    _ length: Int, _ backup: Int32, _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let client = BlockStoreClient(app: open.app, device: open.device)
        let key = try required(key, "key")
        try withBytes(value, length, "value") { bytes in
            _ = try client.storeBytes(
                StoreBytesData(bytes: bytes, key: key, shouldBackupToCloud: backup != 0))
        }
    }
}

/// The value under `key`; freed with `keepsake_secret_free`. errSecItemNotFound-style: Block
/// Store answers an absent key with no value, here status 1 (not found) and no bytes.
@_cdecl("keepsake_blockstore_retrieve")
public func keepsake_blockstore_retrieve(
    _ app: OpaquePointer?, _ key: UnsafePointer<CChar>?,
    _ value: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
    _ length: UnsafeMutablePointer<Int>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let name = try required(key, "key")
        let client = BlockStoreClient(app: open.app, device: open.device)
        guard var found = try client.retrieveBytes(RetrieveBytesRequest(keys: [name]))[name] else {
            throw CFailure(-25300, "no Block Store entry under this key")
        }
        try secretOut(&found, value, length)
    }
}

@_cdecl("keepsake_blockstore_delete")
public func keepsake_blockstore_delete(
    _ app: OpaquePointer?, _ key: UnsafePointer<CChar>?,
    _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        let client = BlockStoreClient(app: open.app, device: open.device)
        _ = try client.deleteBytes(DeleteBytesRequest(keys: [try required(key, "key")]))
    }
}

// MARK: - Sync

/// Syncs the Keychain's and Block Store's cloud copies (the handle's `cloud` option).
@_cdecl("keepsake_sync")
public func keepsake_sync(
    _ app: OpaquePointer?, _ error: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> Int32 {
    boundary(error) {
        let open = try Handles.app(app)
        _ = try KeychainSync(account: open.account).sync()
        _ = try BlockStoreSync(account: open.account).sync()
    }
}
