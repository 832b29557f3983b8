import Device
import Foundation

/// What a WebDAV server honours of what the account's safety rests on, learnt by trying it
/// (`WebDAVCloud.probe()`), never by believing what it announces: servers that name class 2 still
/// answer a conditional PUT by overwriting (rclone, nginx) or grant two exclusive locks at once.
package struct WebDAVCapabilities: Sendable, Hashable, Codable {
    package enum Locking: String, Sendable, Hashable, Codable {
        /// `LOCK` answers 405/501: no locks at all.
        case none
        /// A second exclusive `LOCK` of a locked resource was granted too (a pretend lock).
        case notExclusive = "not-exclusive"
        /// A second exclusive `LOCK` of a locked resource is refused (423).
        case exclusive
    }

    /// The compliance classes of the server's `DAV` header (`1`, `2`, …), as it says them.
    package var davClasses: [String]
    /// Whether a write under a stale `If-Match`, and one under `If-None-Match: *` of an existing
    /// resource, are refused (412) as RFC 7232 requires.
    package var conditionalWrites: Bool
    package var locking: Locking
    /// The lifetime the server granted a lock asked for `WebDAVCloud.lockLifetime` (nil when its
    /// answer did not say).
    package var grantedLockSeconds: Int?

    package init(
        davClasses: [String], conditionalWrites: Bool, locking: Locking, grantedLockSeconds: Int?
    ) {
        self.davClasses = davClasses
        self.conditionalWrites = conditionalWrites
        self.locking = locking
        self.grantedLockSeconds = grantedLockSeconds
    }

    /// Why two devices cannot share an account on this server, with what would fix it; nil when
    /// they can. Writes two devices may race need either conditional writes or a lock that
    /// excludes (then every such write goes under it); the account's sessions need a lock.
    package var refusal: String? {
        switch (locking, conditionalWrites) {
        case (.none, _):
            return
                "the WebDAV server does not support LOCK: Keepsake needs a class 2 WebDAV server, whose locks keep two devices from syncing over each other (nginx: load dav_ext and set dav_ext_lock; Apache: DavLockDB; Nextcloud: the files_lock app)"
        case (.notExclusive, false):
            return
                "the WebDAV server honours neither conditional writes (If-Match, If-None-Match) nor exclusive locks (it granted one lock to two holders): two devices would write over each other's account (Nextcloud: install the files_lock app; nginx: dav_ext_lock)"
        default:
            return nil
        }
    }

    /// What `keepsake cloud login` and `cloud status` print.
    package var json: [String: Any] {
        var object: [String: Any] = [
            "dav": davClasses.joined(separator: ","), "conditionalWrites": conditionalWrites,
            "locking": locking.rawValue,
            "usable": refusal == nil,
        ]
        if let grantedLockSeconds { object["lockSeconds"] = grantedLockSeconds }
        if !conditionalWrites && refusal == nil {
            object["racingWrites"] = "under the account lock"
        }
        return object
    }
}
