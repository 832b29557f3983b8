import BlockStore
import Foundation

/// `keepsake blockstore store|retrieve|delete|e2ee|sync`.
enum BlockStoreCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        let arguments = context.arguments
        let client = BlockStoreClient(app: context.app, device: context.device)
        switch verb {
        case "store":
            try arguments.allowOnly(["key", "backup"])
            let stored = try client.storeBytes(
                StoreBytesData(
                    bytes: try Context.readStandardInput(), key: arguments.value("key"),
                    shouldBackupToCloud: arguments.has("backup")))
            Output.json(stored)
        case "retrieve":
            try arguments.allowOnly(["key", "all"])
            let result = try client.retrieveBytes(
                RetrieveBytesRequest(
                    keys: arguments.values("key"), retrieveAll: arguments.has("all")))
            Output.json(result.mapValues { $0.base64EncodedString() })
        case "delete":
            try arguments.allowOnly(["key", "all"])
            Output.json(
                try client.deleteBytes(
                    DeleteBytesRequest(
                        keys: arguments.values("key"), deleteAll: arguments.has("all"))))
        case "e2ee":
            try arguments.allowOnly([])
            Output.json(try client.isEndToEndEncryptionAvailable())
        case "sync":
            try arguments.allowOnly([])
            try PendingSync.report {
                let report = try BlockStoreSync(account: try context.account).sync()
                var object: [String: Any] = [
                    "uploaded": report.uploaded, "removed": report.removed,
                ]
                object["skipped"] = report.skipped
                return object
            }
        default:
            throw CommandError.usage("blockstore store|retrieve|delete|e2ee|sync")
        }
    }
}
