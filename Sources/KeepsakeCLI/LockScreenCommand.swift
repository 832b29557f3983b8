import BlockStore
import CloudAccount
import Device
import Foundation
import Keychain
import Platform
import Preferences
import RecoveryHint
import Sealing

/// `keepsake lockscreen set|unlock|lock|status`. Passcodes come from standard input, one per line.
enum LockScreenCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        if verb == "lock" { return try context.forget { try $0.lock() } }
        let account = try context.account
        let device = account.device
        switch verb {
        case "set":
            try context.arguments.allowOnly(["kind"])
            guard let name = context.arguments.value("kind"),
                let kind = LockScreenKind(rawValue: name)
            else {
                throw CommandError.usage("lockscreen set --kind none|swipe|pin|pattern|password")
            }
            let current = try device.lockScreenKind()
            var lines = try SecretInput.lines()[...]
            let currentPasscode = current.hasKnowledgeFactor ? lines.popFirst() : nil
            let newPasscode = kind.hasKnowledgeFactor ? lines.popFirst() : nil
            let change = try account.setLockScreen(
                kind, passcode: newPasscode, currentPasscode: currentPasscode)
            // Proving the current passcode reports as an unlock does.
            if let wrong = change.wrongPasscodes { Output.error("keepsake: \(wrong.notice)") }
            if change.knowledgeFactorRemoved {
                try Keychain.deleteItemsRequiringPasscode(on: device)
            }
            if let recoveryKey = change.recoveryKey { showRecoveryKey(recoveryKey) }
            if kind.hasKnowledgeFactor, try device.status().guessLimit == "software" {
                // Said every time: the software path's count is the login keyring's to reset.
                FileHandle.standardError.write(
                    Data(
                        ("keepsake: this passcode's guesses are counted in software: whoever can read the login keyring can guess it offline at the Argon2id cost, and whoever can write it can reset the count. "
                            + "Install the guess counter (`sudo scripts/install-guess-counter`: a service of its own user that counts every guess where no process of yours reaches), then set the passcode again.\n")
                            .utf8))
            }
            if let problem = change.problem {
                // The lock screen is set; the account is not: say so, never in silence.
                FileHandle.standardError.write(
                    Data(
                        "keepsake: the lock screen is set, but the cloud account is not: \(problem) (tried again at the next unlock)\n"
                            .utf8))
            }
        case "unlock":
            try context.arguments.allowOnly([])
            let report = try account.unlockReporting(
                passcode: try SecretInput.lines().first ?? SecureBytes(copying: []))
            if let recoveryKey = report.recoveryKey { showRecoveryKey(recoveryKey) }
            if let wrong = report.wrongPasscodes {
                // The owner is told of every wrong passcode since the last unlock, through
                // Keepsake or straight at the counter.
                FileHandle.standardError.write(Data("keepsake: \(wrong.notice)\n".utf8))
            }
            if let wrong = report.escrowWrongClaims { Output.error("keepsake: \(wrong.notice)") }
            if let problem = report.problem {
                // Unlocked; the account could not be kept up to date: say so, never in silence.
                FileHandle.standardError.write(
                    Data(
                        "keepsake: unlocked, but the cloud account could not be kept up to date: \(problem) (tried again at the next unlock)\n"
                            .utf8))
            }
        case "status":
            try context.arguments.allowOnly([])
            let status = try device.status()
            var fields: [String: Any] = [
                "kind": status.kind.rawValue, "state": status.state.rawValue,
                "e2eeCapable": status.isEndToEndEncryptionCapable,
                "guessLimit": status.guessLimit, "failedAttempts": status.failedAttempts,
            ]
            if let countedIn = status.countedIn { fields["countedIn"] = countedIn }
            Output.json(fields)
        default:
            throw CommandError.usage("lockscreen set|unlock|lock|status")
        }
    }
}
