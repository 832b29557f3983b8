import Foundation
import KeyValueStore

/// `keepsake kv set|get|remove|synchronize --key K`: values are strings, read from standard input
/// and written raw to standard output; external changes are reported on standard error as JSON.
enum KeyValueCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        try context.arguments.allowOnly(["key"])
        let store = UbiquitousKeyValueStore(app: context.app, account: try context.account) {
            change in
            let object: [String: Any] = [
                "reason": change.reason.rawValue, "changedKeys": change.changedKeys,
            ]
            if let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys])
            {
                FileHandle.standardError.write(data + Data("\n".utf8))
            }
        }
        func key() throws -> String {
            guard let key = context.arguments.value("key") else {
                throw CommandError.usage("kv \(verb ?? "") needs --key")
            }
            return key
        }
        func write(_ value: KVValue?, forKey key: String) throws {
            do { try store.write(value, forKey: key) } catch {
                throw CommandError(statusName: "\(error.code)", message: error.message)
            }
        }
        switch verb {
        case "set":
            let value = String(decoding: try Context.readStandardInput(), as: UTF8.self)
            try write(.string(value), forKey: try key())
        case "get":
            guard let value = store.string(forKey: try key()) else {
                throw CommandError(statusName: "not found", message: "no value for that key")
            }
            Output.raw(Data(value.utf8))
        case "remove":
            try write(nil, forKey: try key())
        case "synchronize":
            // `true`, or Apple's `false` (signed out, no end-to-end encryption, no key of the
            // account); a cloud that cannot be reached is pending, with the keys still to go up;
            // a cloud copy refused (rolled back, tampered with) is an error that says so.
            try PendingSync.report(pending: { ["pendingKeys": store.pendingKeys] }) {
                do throws(KeyValueStoreError) { try store.checkedSynchronize() } catch {
                    guard error.code == .noCloudAccount else { throw error }
                    return false
                }
                return true
            }
        default:
            throw CommandError.usage("kv set|get|remove|synchronize --key K")
        }
    }
}
