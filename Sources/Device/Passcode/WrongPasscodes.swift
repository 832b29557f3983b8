import Foundation

/// Wrong passcodes since the owner was last told, as every route that proves the passcode
/// (unlock, a lock-screen change, an item read with the passcode, a join) reports them: on the
/// counted path every claim the guess counter counted against this user (through Keepsake or
/// straight at it, on any slot), with the times of the first and the last; elsewhere those the
/// device record counted (no time). At the account's escrow: the claims made there by devices
/// trying to join (`atAccountEscrow`).
public struct WrongPasscodes: Sendable, Hashable {
    /// How many.
    public var count: Int
    /// When the last was (nil where it is not known: off the counted path).
    public var last: Date?
    /// When the first was (nil where it is not known).
    public var since: Date?
    /// Claims at the cloud account's escrow (devices trying to join with a passcode), not at
    /// this device.
    public var atAccountEscrow: Bool

    /// `count` wrong passcodes, the first at `since` and the last at `last`.
    public init(count: Int, last: Date?, since: Date? = nil, atAccountEscrow: Bool = false) {
        self.count = count
        self.last = last
        self.since = since
        self.atAccountEscrow = atAccountEscrow
    }

    /// "3 wrong passcodes since your last unlock, the last at 2026-12-04T11:52:07Z"; at the
    /// account's escrow "2 wrong passcode claims at the account's escrow since
    /// 2026-12-04T09:00:00Z, the last at …".
    public var notice: String {
        let when = last.map { ", the last at " + Self.time($0) } ?? ""
        if atAccountEscrow {
            let noun = count == 1 ? "wrong passcode claim" : "wrong passcode claims"
            let since = since.map { " since " + Self.time($0) } ?? ""
            return "\(count) \(noun) at the account's escrow\(since)\(when)"
        }
        let noun = count == 1 ? "wrong passcode" : "wrong passcodes"
        return "\(count) \(noun) since your last unlock\(when)"
    }

    /// A time as the notices say it: ISO 8601, UTC, to the second.
    package static func time(_ date: Date) -> String {
        date.formatted(
            .iso8601.year().month().day().time(includingFractionalSeconds: false)
                .timeZone(separator: .omitted))
    }
}
