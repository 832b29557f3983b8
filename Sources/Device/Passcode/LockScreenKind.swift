import Foundation
import Sealing

/// The kinds of lock screen. pin, pattern and password are knowledge factors: they make the device
/// end-to-end-encryption capable and protect the class keys.
public enum LockScreenKind: String, Sendable, Hashable, CaseIterable, Codable {
    /// `none` and `swipe` take no passcode; `pin`, `pattern` and `password` take one of their
    /// shape (`validate(_:)`).
    case none, swipe, pin, pattern, password

    /// Whether this kind is a knowledge factor: true for `pin`, `pattern` and `password`.
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
    /// `beforeFirstUnlock`: no class key since boot; `unlocked`: every class key held; `locked`:
    /// only the keys not dropped at lock (`afterFirstUnlock…`) held.
    case beforeFirstUnlock, unlocked, locked
}
