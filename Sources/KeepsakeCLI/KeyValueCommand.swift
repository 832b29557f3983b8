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
            // A string or data raw (what `set` wrote, or an app's `set(_:forKey:)`); any other
            // value as its JSON.
            switch store.object(forKey: try key()) {
            case nil: throw CommandError(statusName: "not found", message: "no value for that key")
            case .string(let value): Output.raw(Data(value.utf8))
            case .data(let value): Output.raw(value)
            case let value?: Output.json(Self.json(value))
            }
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

    /// A value as JSON: data as base64, a date as ISO 8601.
    static func json(_ value: KVValue) -> Any {
        switch value {
        case .string(let value): value
        case .data(let value): value.base64EncodedString()
        case .int(let value): value
        case .double(let value): value.isFinite ? value : "\(value)"
        case .bool(let value): value
        case .date(let value): ISO8601DateFormatter().string(from: value)
        case .array(let items): items.map(json)
        case .dictionary(let entries): entries.mapValues(json)
        }
    }
}
