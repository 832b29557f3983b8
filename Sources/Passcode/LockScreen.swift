import Foundation
import Sealing

/// The kinds of lock screen. pin, pattern and password are knowledge factors: they make the device
/// end-to-end-encryption capable and protect the class keys.
public enum LockScreenKind: String, Sendable, Hashable, CaseIterable, Codable {
    case none, swipe, pin, pattern, password

    public var hasKnowledgeFactor: Bool {
        switch self {
        case .none, .swipe: false
        case .pin, .pattern, .password: true
        }
    }

    /// Checks a passcode's shape for this kind and returns its canonical form, as bytes in owned
    /// memory (a passcode never becomes a `String`).
    ///
    /// pin: at least 4 ASCII digits. pattern: at least 4 distinct cells of the 3×3 grid, written
    /// 1–9 joined by `-`. password: valid UTF-8, at least 4 characters (Unicode scalars).
    /// none/swipe take no passcode.
    ///
    /// - Throws: `.invalidPasscode` (errSecParam) for a passcode that does not fit, or is not
    ///   valid UTF-8.
    public func validate(_ passcode: SecureBytes) throws(DeviceError) -> SecureBytes {
        let scalars = try Self.scalarCount(passcode)
        switch self {
        case .none, .swipe:
            throw DeviceError(.invalidPasscode, "a \(rawValue) lock screen takes no passcode")
        case .pin:
            let digits = passcode.withUnsafeBytes { bytes in
                bytes.allSatisfy { (0x30...0x39).contains($0) }
            }
            guard passcode.count >= 4, digits else {
                throw DeviceError(.invalidPasscode, "a pin is at least 4 digits")
            }
            return passcode
        case .pattern:
            // Cells are single digits 1–9 separated by '-': "1-5-9-6".
            let cells: [UInt8]? = passcode.withUnsafeBytes { bytes in
                var cells: [UInt8] = []
                for (index, byte) in bytes.enumerated() {
                    if index % 2 == 0 {
                        guard (0x31...0x39).contains(byte) else { return nil }
                        cells.append(byte)
                    } else if byte != UInt8(ascii: "-") {
                        return nil
                    }
                }
                return bytes.count % 2 == 1 ? cells : nil
            }
            guard let cells, cells.count >= 4, Set(cells).count == cells.count else {
                throw DeviceError(
                    .invalidPasscode, "a pattern is at least 4 distinct cells 1–9 joined by '-'")
            }
            return passcode
        case .password:
            guard scalars >= 4 else {
                throw DeviceError(.invalidPasscode, "a password is at least 4 characters")
            }
            return passcode
        }
    }

    /// Refuses, before anything is counted, what can never be a passcode of any kind: bytes that
    /// are not UTF-8 (two such strings would both read as U+FFFD and unlock each other), or fewer
    /// than 4 characters (the shortest pin, pattern or password). Every guess — an unlock, a
    /// lock-screen change or a protected item proving the current passcode, a join through the
    /// escrow — passes here first, so an empty or malformed input never spends one of the limited
    /// attempts.
    ///
    /// - Throws: `.invalidPasscode` (errSecParam).
    package static func checkGuess(_ passcode: SecureBytes) throws(DeviceError) {
        guard try scalarCount(passcode) >= 4 else {
            throw DeviceError(
                .invalidPasscode,
                "a passcode is at least 4 characters: nothing shorter is tried or counted")
        }
    }

    /// The number of Unicode scalars in `bytes`, decoded in place.
    ///
    /// - Throws: `.invalidPasscode` when the bytes are not valid UTF-8 (two byte strings that are
    ///   not UTF-8 would otherwise both read as U+FFFD and unlock each other).
    package static func scalarCount(_ bytes: SecureBytes) throws(DeviceError) -> Int {
        let count: Int? = bytes.withUnsafeBytes { raw in
            var parser = Unicode.UTF8.ForwardParser()
            var iterator = raw.makeIterator()
            var count = 0
            while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid: count += 1
                case .emptyInput: return count
                case .error: return nil
                }
            }
        }
        guard let count else {
            throw DeviceError(.invalidPasscode, "a passcode must be valid UTF-8")
        }
        return count
    }
}

/// The device's lock state: `beforeFirstUnlock` after boot, then `unlocked` ⇄ `locked`.
public enum LockState: String, Sendable, Hashable, Codable {
    case beforeFirstUnlock, unlocked, locked
}

/// Apple's data-protection classes, as the Device knows them: one key each.
public enum ProtectionClass: String, Sendable, Hashable, CaseIterable, Codable {
    case whenUnlocked = "ak"
    case afterFirstUnlock = "ck"
    case whenPasscodeSetThisDeviceOnly = "akpu"
    case whenUnlockedThisDeviceOnly = "aku"
    case afterFirstUnlockThisDeviceOnly = "cku"

    /// Keys dropped at lock.
    public var isDroppedAtLock: Bool {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: true
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: false
        }
    }

    /// Exists only while a knowledge factor is set.
    public var requiresPasscode: Bool { self == .whenPasscodeSetThisDeviceOnly }
}

/// How wrong passcodes are slowed down: after n consecutive failures the next attempt waits
/// `base × 2^(n−1)`, capped at `maximum`. Held in the Secret Service, so it survives processes and
/// restarts.
package struct RetryPolicy: Sendable, Hashable {
    package var base: Duration
    package var maximum: Duration
    /// Longest wait an attempt sits through before answering errSecAuthFailed at once.
    package var longestWait: Duration

    package init(
        base: Duration = .seconds(1), maximum: Duration = .seconds(3600),
        longestWait: Duration = .seconds(10)
    ) {
        self.base = base
        self.maximum = maximum
        self.longestWait = longestWait
    }

    package func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let factor = 1 << min(failures - 1, 30)
        return min(base * factor, maximum)
    }
}

/// The time the wrong-passcode delays are measured and sat out in: the wall clock (`system`) on
/// every shipped device. Tests pass a clock of their own that advances instead of sleeping, so a
/// delay is checked without waiting for it.
package struct GuessClock: Sendable, Hashable {
    /// Milliseconds since 1970 (delays are kept in the device record, across processes).
    package let now: @Sendable () -> Int64
    /// Waits `milliseconds`.
    package let sleep: @Sendable (_ milliseconds: Int64) -> Void
    private let identity: UUID

    package init(
        now: @escaping @Sendable () -> Int64, sleep: @escaping @Sendable (Int64) -> Void
    ) {
        self.now = now
        self.sleep = sleep
        identity = UUID()
    }

    package static let system = GuessClock(
        now: { Int64(Date().timeIntervalSince1970 * 1000) },
        sleep: { Thread.sleep(forTimeInterval: Double($0) / 1000) })

    package static func == (a: Self, b: Self) -> Bool { a.identity == b.identity }
    package func hash(into hasher: inout Hasher) { hasher.combine(identity) }
}

/// How expensive a device makes passcode guessing: the Argon2id cost for a newly set passcode and
/// the wrong-passcode delays (and the clock they run on). `real` is what every shipped device
/// uses; the cheaper tunings the tests need are built by the test support target through this
/// `package` type.
package struct DeviceTuning: Sendable, Hashable {
    package var passcodeCost: Argon2Cost
    package var retryPolicy: RetryPolicy
    package var clock: GuessClock

    package init(passcodeCost: Argon2Cost, retryPolicy: RetryPolicy, clock: GuessClock = .system) {
        self.passcodeCost = passcodeCost
        self.retryPolicy = retryPolicy
        self.clock = clock
    }

    package static let real = DeviceTuning(passcodeCost: .moderate, retryPolicy: RetryPolicy())
}
