import Foundation
import Keychain

/// `keepsake keychain add|get|update|delete|list`.
package enum KeychainCommand {
    static let options: Set<String> = [
        "service", "account", "sync", "accessible", "label", "access-group", "access-control",
        "server", "port", "path", "protocol", "authentication-type", "security-domain",
        "with-passcode", "with-app-password", "skip-protected",
    ]

    static func run(_ verb: String?, _ context: Context) throws {
        let arguments = context.arguments
        try arguments.allowOnly(options)
        if verb == "sync" {
            // Synchronizable items of every app on the device, with --cloud, now.
            return try PendingSync.report {
                let account = try context.account
                let report = try KeychainSync(account: account).sync()
                if let wrong = account.escrowWrongClaims() {
                    Output.error("keepsake: \(wrong.notice)")
                }
                var object: [String: Any] = [
                    "uploaded": report.uploaded, "downloaded": report.downloaded,
                    "deleted": report.deleted,
                ]
                object["skipped"] = report.skipped
                return object
            }
        }
        // Items stay on this device: the cloud (and its credentials) is only for `sync`.
        let keychain = Keychain(app: context.app, device: context.device)
        // `--server` makes it an internet password (no service); otherwise a generic one.
        let server = arguments.value("server")
        let service = arguments.value("service")
        guard (service == nil) != (server == nil) else {
            throw CommandError.usage("keychain \(verb ?? "") needs --service or --server")
        }
        let port = try arguments.value("port").map { (text: String) throws(CommandError) in
            guard let port = Int(text) else { throw CommandError.usage("--port takes a number") }
            return port
        }
        let sync = try synchronizable(arguments.value("sync"))
        let accessible = try arguments.value("accessible").map(accessibility)
        let query = GenericPasswordQuery(
            service: service, account: arguments.value("account"),
            accessGroup: arguments.value("access-group"), synchronizable: sync,
            itemClass: server == nil ? .genericPassword : .internetPassword, server: server,
            port: port, path: arguments.value("path"),
            internetProtocol: arguments.value("protocol"),
            authenticationType: arguments.value("authentication-type"),
            securityDomain: arguments.value("security-domain"))
        switch verb {
        case "add":
            if sync == .any {
                throw KeychainError(KeychainStatus.param, "--sync any is for queries, not for add")
            }
            let constraints = try arguments.value("access-control").map(accessControl) ?? []
            let (authentication, secret) = try credentials(arguments)
            try keychain.add(
                GenericPasswordAttributes(
                    service: service ?? "", account: arguments.value("account") ?? "",
                    accessGroup: arguments.value("access-group"), synchronizable: sync == .yes,
                    accessible: accessible ?? .whenUnlocked, label: arguments.value("label"),
                    internet: server.map {
                        InternetLocation(
                            server: $0, port: port ?? 0, path: query.path ?? "",
                            internetProtocol: query.internetProtocol ?? "",
                            authenticationType: query.authenticationType ?? "",
                            securityDomain: query.securityDomain ?? "")
                    }, accessControl: constraints),
                data: secret, authentication: authentication)
        case "get":
            let (authentication, _) = try credentials(arguments)
            Output.raw(try keychain.data(matching: query, authentication: authentication))
        case "update":
            // The new secret is what standard input holds after the credentials; none keeps it.
            let (authentication, input) = try credentials(arguments, secret: isatty(0) == 0)
            try keychain.update(
                matching: query,
                with: GenericPasswordChanges(
                    accessible: accessible, label: arguments.value("label"),
                    data: input.isEmpty ? nil : input),
                authentication: authentication)
        case "delete":
            try keychain.delete(matching: query)
        case "list":
            let items = try keychain.listing(query)
            Output.json(items.map(\.attributes.jsonObject))
        default:
            throw CommandError.usage("keychain add|get|update|delete|list|sync")
        }
    }

    /// The credentials of a use, from standard input and never from the command line: with
    /// `--with-passcode` its first line is the device passcode, with `--with-app-password` the
    /// next line is the app's password; what follows is the item's secret (when `secret`).
    static func credentials(_ arguments: Arguments, secret: Bool = true) throws
        -> (ItemAuthentication, Data)
    {
        let wantsPasscode = arguments.has("with-passcode")
        let wantsPassword = arguments.has("with-app-password")
        let count = (wantsPasscode ? 1 : 0) + (wantsPassword ? 1 : 0)
        var authentication = ItemAuthentication(
            skipItemsNeedingAuthentication: arguments.has("skip-protected"))
        guard count > 0 || secret else { return (authentication, Data()) }
        let (lines, rest) = try SecretInput.leadingLines(count)
        guard lines.count == count else {
            throw CommandError.param("standard input ends before the credentials it should hold")
        }
        if wantsPasscode {
            authentication.passcode = lines[0]
            // Each proof of the passcode reports as an unlock does.
            authentication.reportWrongPasscodes = { Output.error("keepsake: \($0.notice)") }
        }
        if wantsPassword { authentication.applicationPassword = lines[count - 1] }
        return (authentication, secret ? rest : Data())
    }

    /// `--access-control` names, comma-separated: `passcode` (Apple's `.devicePasscode`),
    /// `user-presence`, `app-password`, `biometry-any`, `biometry-current-set`, `companion`, and
    /// `or` (any one suffices; otherwise all are needed).
    static func accessControl(_ text: String) throws(CommandError) -> AccessConstraints {
        let names: [String: AccessConstraints] = [
            "passcode": .devicePasscode, "user-presence": .userPresence,
            "app-password": .applicationPassword, "biometry-any": .biometryAny,
            "biometry-current-set": .biometryCurrentSet, "companion": .companion, "or": .or,
        ]
        var constraints: AccessConstraints = []
        for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let constraint = names[name] else {
                throw CommandError.usage(
                    "--access-control takes " + names.keys.sorted().joined(separator: ", "))
            }
            constraints.insert(constraint)
        }
        return constraints
    }

    static func synchronizable(_ value: String?) throws(CommandError) -> SynchronizableMatch {
        switch value {
        case nil, "no": .no
        case "yes": .yes
        case "any": .any
        default: throw CommandError.usage("--sync takes yes, no or any")
        }
    }

    static func accessibility(_ name: String) throws(CommandError) -> Accessibility {
        guard let value = Accessibility(commandLineName: name) else {
            throw CommandError.usage(
                "--accessible takes "
                    + Accessibility.allCases.map(\.commandLineName).joined(separator: ", "))
        }
        return value
    }
}
