import Device
import Foundation
import Keychain

/// `keepsake lockscreen set|unlock|lock|status`. Passcodes come from standard input, one per line.
enum LockScreenCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        let device = context.device
        switch verb {
        case "set":
            try context.arguments.allowOnly(["kind"])
            guard let name = context.arguments.value("kind"), let kind = LockScreenKind(rawValue: name) else {
                throw CommandError.usage("lockscreen set --kind none|swipe|pin|pattern|password")
            }
            let current = try device.lockScreenKind()
            var lines = Context.readLines()[...]
            let currentPasscode = current.hasKnowledgeFactor ? lines.popFirst() : nil
            let newPasscode = kind.hasKnowledgeFactor ? lines.popFirst() : nil
            let change = try device.setLockScreen(kind, passcode: newPasscode, currentPasscode: currentPasscode)
            if change.knowledgeFactorRemoved {
                try Keychain.deleteItemsRequiringPasscode(on: device)
            }
        case "unlock":
            try context.arguments.allowOnly([])
            try device.unlock(passcode: Context.readLines().first ?? "")
        case "lock":
            try context.arguments.allowOnly([])
            try device.lock()
        case "status":
            try context.arguments.allowOnly([])
            let kind = try device.lockScreenKind()
            Output.json([
                "kind": kind.rawValue, "state": try device.state().rawValue,
                "e2eeCapable": kind.hasKnowledgeFactor,
            ])
        default:
            throw CommandError.usage("lockscreen set|unlock|lock|status")
        }
    }
}

/// `keepsake device reboot`: runtime state is forgotten.
enum DeviceCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        try context.arguments.allowOnly([])
        switch verb {
        case "reboot": try context.device.reboot()
        default: throw CommandError.usage("device reboot")
        }
    }
}
