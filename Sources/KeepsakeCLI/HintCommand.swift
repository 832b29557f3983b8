import Foundation
import RecoveryHint

/// `keepsake hint get | set [--authenticator-id X] [--wallet W] [--login-at MS] | clear
/// [--profile linux|apple|android]`.
enum HintCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        let arguments = context.arguments
        let profileName = arguments.value("profile") ?? "linux"
        guard let profile = HintProfile(rawValue: profileName) else {
            throw CommandError.usage("--profile linux|apple|android")
        }
        let service = try RecoveryHintService.make(
            profile: profile, app: context.app, account: try context.account)
        switch verb {
        case "get":
            try arguments.allowOnly(["profile"])
            Output.raw(try service.get().hint.json() + Data("\n".utf8))
        case "set":
            try arguments.allowOnly(["profile", "authenticator-id", "wallet", "login-at"])
            var loginAt: Int64?
            if let text = arguments.value("login-at") {
                guard let value = Int64(text), value >= 0, value <= RecoveryHint.latestLoginAt
                else {
                    throw CommandError.usage(
                        "--login-at takes milliseconds since 1970 (up to the year 3000)")
                }
                loginAt = value
            }
            if let wallet = arguments.value("wallet"), !RecoveryHint.isAddress(wallet) {
                throw CommandError.usage("--wallet takes an address: 0x and 40 hex digits")
            }
            let (hint, outcomes) = try service.update(
                RecoveryHint(
                    lastAuthenticatorId: arguments.value("authenticator-id"),
                    lastWallet: arguments.value("wallet"), lastLoginAt: loginAt))
            let hintObject = try JSONSerialization.jsonObject(with: hint.json())
            Output.json(["hint": hintObject, "stores": outcomes.map(json)])
        case "clear":
            try arguments.allowOnly(["profile"])
            Output.json(["stores": service.clear().map(json)])
        default:
            throw CommandError.usage(
                "hint get | set [--authenticator-id X] [--wallet W] [--login-at MS] | clear [--profile P]"
            )
        }
    }

    static func json(_ outcome: StoreOutcome) -> [String: Any] {
        var object: [String: Any] = ["store": outcome.store, "ok": outcome.succeeded]
        object["error"] = outcome.error
        return object
    }
}
