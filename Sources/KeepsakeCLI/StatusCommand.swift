import CloudAccount
import Device
import Foundation
import RecoveryHint

/// `keepsake status [--profile linux|apple|android]`: every store's local copy, its cloud copy
/// (verified against the account's manifest), the last sync, what is pending and, when nothing
/// goes to the cloud, why (`SyncStatus`). Reads only.
enum StatusCommand {
    static func run(_ context: Context) throws {
        try context.arguments.allowOnly(["profile"])
        let profileName = context.arguments.value("profile") ?? "linux"
        guard let profile = HintProfile(rawValue: profileName) else {
            throw CommandError.usage("--profile linux|apple|android")
        }
        // It reports only what it could look at: with no Secret Service (or a locked
        // collection) it says why and exits 1, never "nothing found" for what it could not read.
        _ = try context.device.status()
        let status = SyncStatus.read(
            app: context.app, account: try context.account, profile: profile)
        let account = status.account
        let accountObject: [String: Any] = [
            "signedIn": account.signedIn, "endToEndEncryption": account.endToEndEncryption,
            "joined": account.joined,
            "manifestVersion": account.manifestVersion.map { NSNumber(value: $0) } ?? NSNull(),
            "problem": account.problem as Any? ?? NSNull(),
            "notSyncing": account.notSyncing as Any? ?? NSNull(),
        ]
        Output.json([
            "account": accountObject,
            "stores": [
                "keychainSync": json(status.keychainSync), "blockStore": json(status.blockStore),
                "keyValueStore": json(status.keyValueStore), "autoBackup": json(status.autoBackup),
                "hint": json(status.hint),
            ],
        ])
    }

    static func json(_ store: StoreStatus) -> [String: Any] {
        [
            "local": store.local, "cloud": store.cloud as Any? ?? NSNull(),
            "pending": store.pending as Any? ?? NSNull(),
            "lastSync": store.lastSync.map { ISO8601DateFormatter().string(from: $0) } as Any?
                ?? NSNull(),
            "notSyncing": store.notSyncing as Any? ?? NSNull(),
        ]
    }
}
