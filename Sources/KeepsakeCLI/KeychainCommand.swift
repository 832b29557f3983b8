import Foundation
import Keychain

/// `keepsake keychain add|get|update|delete|list`.
package enum KeychainCommand {
    static let options: Set<String> = [
        "service", "account", "sync", "accessible", "label", "access-group",
    ]

    static func run(_ verb: String?, _ context: Context) throws {
        let arguments = context.arguments
        try arguments.allowOnly(options)
        if verb == "sync" {
            // Synchronizable items of every app on the device, with --cloud, now.
            let report = try KeychainSync(device: context.device).sync()
            var object: [String: Any] = [
                "uploaded": report.uploaded, "downloaded": report.downloaded,
                "deleted": report.deleted,
            ]
            object["skipped"] = report.skipped
            return Output.json(object)
        }
        let keychain = Keychain(app: context.app, device: context.device)
        guard let service = arguments.value("service") else {
            throw CommandError.usage("keychain \(verb ?? "") needs --service")
        }
        let sync = try synchronizable(arguments.value("sync"))
        let accessible = try arguments.value("accessible").map(accessibility)
        let query = GenericPasswordQuery(
            service: service, account: arguments.value("account"),
            accessGroup: arguments.value("access-group"), synchronizable: sync)
        switch verb {
        case "add":
            if sync == .any {
                throw KeychainError(KeychainStatus.param, "--sync any is for queries, not for add")
            }
            try keychain.add(
                GenericPasswordAttributes(
                    service: service, account: arguments.value("account") ?? "",
                    accessGroup: arguments.value("access-group"), synchronizable: sync == .yes,
                    accessible: accessible ?? .whenUnlocked, label: arguments.value("label")),
                data: Context.readStandardInput())
        case "get":
            Output.raw(try keychain.data(matching: query))
        case "update":
            // The new secret is standard input when some is given; empty input keeps the secret.
            let input = isatty(0) == 0 ? Context.readStandardInput() : Data()
            try keychain.update(
                matching: query,
                with: GenericPasswordChanges(
                    accessible: accessible, label: arguments.value("label"),
                    data: input.isEmpty ? nil : input))
        case "delete":
            try keychain.delete(matching: query)
        case "list":
            let items = try listItems(keychain, query)
            Output.json(items.map { json($0.attributes) })
        default:
            throw CommandError.usage("keychain add|get|update|delete|list|sync")
        }
    }

    /// Every match; an empty listing is not an error.
    package static func listItems(_ keychain: Keychain, _ query: GenericPasswordQuery) throws
        -> [GenericPasswordItem]
    {
        do {
            return try keychain.items(matching: query, limit: .all, returnData: false)
        } catch let error as KeychainError where error.status == KeychainStatus.itemNotFound {
            return []
        }
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
            throw CommandError.param(
                "--accessible takes "
                    + Accessibility.allCases.map(\.commandLineName).joined(separator: ", "))
        }
        return value
    }

    /// An item's attributes as JSON; never its secret.
    static func json(_ a: GenericPasswordAttributes) -> [String: Any] {
        var object: [String: Any] = [
            "service": a.service, "account": a.account, "accessGroup": a.accessGroup ?? "",
            "synchronizable": a.synchronizable, "accessible": a.accessible.commandLineName,
        ]
        object["label"] = a.label
        object["comment"] = a.comment
        object["description"] = a.itemDescription
        object["creationDate"] = a.creationDate.map { Int64($0.timeIntervalSince1970 * 1000) }
        object["modificationDate"] = a.modificationDate.map {
            Int64($0.timeIntervalSince1970 * 1000)
        }
        return object
    }
}
