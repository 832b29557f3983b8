import CloudAccount
import Device
import Foundation
import Keychain
import AppWiring
import RecoveryHint
import Synchronization

/// What one `keepsake_app` handle holds: the app, its device and the cloud account it is signed
/// in to, and the stores over them, built once at `keepsake_app_open` by the app's wiring
/// (`OpenedApp`), as the command line's are.
final class OpenApp: Sendable {
    let opened: OpenedApp
    let account: CloudAccount
    var app: App { opened.app }
    var device: Device { account.device }
    let keychain: Keychain
    let hints: RecoveryHints

    init(_ options: AppOptions) throws {
        opened = try OpenedApp(options)
        account = try opened.account()
        keychain = Keychain(app: opened.app, device: account.device)
        hints = RecoveryHints(
            service: try? RecoveryHintService.make(
                profile: .linux, app: opened.app, account: account),
            log: { _ in })
    }
}

/// The open handles, by number: a handle is its number, never a pointer to memory, so a handle
/// used after `keepsake_app_close` (or never opened) is refused with a clear error rather than
/// read (`errSecParam`).
enum Handles {
    private static let open = Mutex<(next: UInt, apps: [UInt: OpenApp])>((1, [:]))

    static func add(_ app: OpenApp) -> OpaquePointer? {
        let number = open.withLock { state in
            let number = state.next
            state.next += 1
            state.apps[number] = app
            return number
        }
        return OpaquePointer(bitPattern: number)
    }

    static func app(_ handle: OpaquePointer?) throws(CFailure) -> OpenApp {
        guard let handle, let app = open.withLock({ $0.apps[UInt(bitPattern: handle)] }) else {
            throw CFailure(-50, "not an open keepsake_app handle (closed already, or never opened)")
        }
        return app
    }

    static func close(_ handle: OpaquePointer?) -> Bool {
        guard let handle else { return false }
        return open.withLock { $0.apps.removeValue(forKey: UInt(bitPattern: handle)) } != nil
    }
}
