import BlockStore
import CloudAccount
import Device
import Foundation
import Keychain
import Platform
import Preferences
import RecoveryHint
import Sealing

/// `keepsake device reboot | wipe | join | requests | approve | recovery-key | devices | remove |
/// transfer | settings`.
enum DeviceCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        if verb == "reboot" { return try context.forget { try $0.reboot() } }
        let account = try context.account
        switch verb {
        case "wipe":
            // Erase all content and settings: the one way back from a disabled device.
            try context.arguments.allowOnly([])
            try account.device.wipe()
        case "join":
            // A new device joins --cloud, then restores its Block Store entries.
            try context.arguments.allowOnly(["approval", "recovery-key", "passcode", "timeout"])
            let ways = ["approval", "recovery-key", "passcode"].filter(context.arguments.has)
            guard ways.count == 1 else {
                throw CommandError.usage("device join --approval | --recovery-key | --passcode")
            }
            var note: String?
            switch ways[0] {
            case "approval":
                let timeout = try context.arguments.count("timeout", default: 300, in: 1...3600)
                let ticket = try account.requestJoin()
                // Posted: the user types the code shown here on an unlocked device of the
                // account (`device approve --code C` there).
                guard
                    let code = try account.awaitCode(
                        of: ticket, timeout: .seconds(timeout))
                else {
                    throw CommandError(
                        statusName: "errSecUserCanceled (-128)",
                        message: "no code for this join request")
                }
                Output.json([
                    "request": ticket.id, "code": code,
                    "waiting":
                        "run `keepsake device approve --code \(code)` on an unlocked device of the account",
                ])
                guard try account.awaitApproval(of: ticket, timeout: .seconds(timeout))
                else {
                    throw CommandError(
                        statusName: "errSecUserCanceled (-128)",
                        message:
                            "no approval within \(timeout) s (device approve --code \(code) there)")
                }
            case "recovery-key":
                note = try account.join(
                    recoveryKey: try SecretInput.lines().first ?? SecureBytes(copying: [])
                ).warning
            default:
                let joined = try account.joinReporting(
                    passcode: try SecretInput.lines().first ?? SecureBytes(copying: []))
                note = joined.vouching.warning
                if let wrong = joined.wrongPasscodes { Output.error("keepsake: \(wrong.notice)") }
            }
            // Said where the user sees it: the state restored is the one the cloud showed.
            if let note { Output.error("keepsake: warning: \(note)") }
            let restored = try BlockStoreSync(account: account).restore()
            var result: [String: Any] = ["restored": restored]
            if let note { result["unvouched"] = note }
            Output.json(result)
        case "requests":
            try context.arguments.allowOnly([])
            // The requests waiting: their codes are on the new devices' screens only.
            Output.json(try account.joinRequests().map { ["id": $0.id] })
        case "approve":
            try context.arguments.allowOnly(["code"])
            try account.approveJoin(code: context.arguments.value("code"))
            Output.json(["approved": true])
        case "recovery-key":
            try context.arguments.allowOnly([])
            showRecoveryKey(try account.replaceRecoveryKey())
        case "devices":
            // The account's devices, as its manifest lists them.
            try context.arguments.allowOnly([])
            Output.json(
                try account.accountDevices().map {
                    ["id": $0.id, "thisDevice": $0.isThisDevice]
                })
        case "remove":
            // Drops a device from the account and rotates the account key away from it.
            try context.arguments.allowOnly(["id"])
            guard let id = context.arguments.value("id"),
                id.count == 32, id.allSatisfy({ $0.isHexDigit && !$0.isUppercase })
            else {
                throw CommandError.usage(
                    "device remove --id ID (32 hex digits, see device devices)")
            }
            try account.removeDevice(id)
            Output.json(["removed": id])
        case "transfer":
            // One file, one one-time key: the device's Block Store entries and the app's
            // device-transfer preferences (its Auto Backup rules; cloud backup need not be on).
            try context.arguments.allowOnly(["out", "in"])
            let transfer = DeviceTransfer(app: context.app, device: account.device)
            if let out = context.arguments.value("out") {
                let (bundle, key) = try transfer.transferOut()
                try Files.writeAtomically(bundle, to: URL(fileURLWithPath: out))
                Output.line(key)
            } else if let input = context.arguments.value("in") {
                guard let bytes = try Files.read(URL(fileURLWithPath: input)) else {
                    throw CommandError.usage("no transfer file at \(input)")
                }
                let count = try transfer.transferIn(bytes, key: try Context.readLines().first ?? "")
                Output.json(["imported": count])
            } else {
                throw CommandError.usage("device transfer --out FILE | --in FILE")
            }
        case "settings":
            try context.arguments.allowOnly(["block-store", "device-backup"])
            func flag(_ name: String) throws -> Bool? {
                guard let value = context.arguments.value(name) else { return nil }
                guard value == "yes" || value == "no" else {
                    throw CommandError.usage("--\(name) yes|no")
                }
                return value == "yes"
            }
            let blockStore = try flag("block-store")
            let backup = try flag("device-backup")
            try account.device.updateSettings { settings in
                if let blockStore { settings.blockStoreAvailable = blockStore }
                if let backup { settings.backupEnabled = backup }
            }
            let settings = try account.device.settings()
            Output.json([
                "blockStore": settings.blockStoreAvailable, "backup": settings.backupEnabled,
            ])
        default:
            throw CommandError.usage(
                "device reboot | wipe | join --approval|--recovery-key|--passcode | requests | approve --code C | recovery-key | transfer --out FILE|--in FILE | settings"
            )
        }
    }
}

/// Prints a new recovery key as `{"recoveryKey": "…"}`: the one time it is shown. The text goes
/// from owned memory straight to standard output.
func showRecoveryKey(_ key: SecureBytes) {
    Output.raw(Data("{\"recoveryKey\":\"".utf8))
    key.withUnsafeBytes { Output.raw(Data($0)) }
    Output.raw(Data("\"}\n".utf8))
}
