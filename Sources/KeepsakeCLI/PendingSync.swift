import BlockStore
import CloudAccount
import Device
import Foundation
import KeyValueStore
import Keychain

/// A sync the cloud could not take: every local store keeps working, and the command says so —
/// `{"pending": true, "reason": …}` on standard output, the reason on standard error, exit 75
/// (EX_TEMPFAIL: try again later). Any other failure is reported as usual.
enum PendingSync {
    /// `pending`: what stays to be uploaded, added to the pending answer (`"pendingKeys": […]`).
    static func report(
        pending: () -> [String: Any] = { [:] }, _ body: () throws -> Any
    ) throws {
        do {
            Output.json(try body())
        } catch {
            guard let cloud = cloudFailure(error) else { throw error }
            guard cloud.isTemporary else {
                // Trying again will not help: say what will.
                throw CommandError(statusName: "cloud refused", message: cloud.description)
            }
            Output.json(
                pending().merging(["pending": true, "reason": cloud.description]) { $1 }
                    as [String: Any])
            throw CommandError(
                statusName: "pending",
                message:
                    "the cloud account is unreachable (\(cloud.description)): nothing local was changed; sync again later",
                exitCode: 75)
        }
    }

    /// The cloud's own failure behind `error`, if that is what it is.
    static func cloudFailure(_ error: any Error) -> CloudError? {
        var current: (any Error)? = error
        for _ in 0..<8 {
            switch current {
            case let cloud as CloudError: return cloud
            case let device as DeviceError: current = device.underlying
            case let blockStore as BlockStoreError: current = blockStore.underlying
            case let keychain as KeychainError: current = keychain.underlying
            case let keyValue as KeyValueStoreError: current = keyValue.underlying
            default: return nil
            }
        }
        return nil
    }
}
