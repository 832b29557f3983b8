import Foundation
import Sealing
import Platform

/// The recovery hint: tiny and non-sensitive — which authenticator, which wallet, when — kept so
/// that a reinstall says "Welcome back" instead of "Create a wallet".
///
/// JSON: `{"lastAuthenticatorId": String?, "lastWallet": String?, "lastLoginAt": Int64?}`, these
/// names exactly; `lastLoginAt` in milliseconds since 1970.
public struct RecoveryHint: Sendable, Hashable, Codable {
    /// The authenticator used last: 1…256 bytes of UTF-8, no control or bidirectional-formatting
    /// character.
    public var lastAuthenticatorId: String?
    /// The wallet used last: an EVM address, `0x` and 40 hex digits.
    public var lastWallet: String?
    /// When the user last logged in, in milliseconds since 1970 (up to the year 3000).
    public var lastLoginAt: Int64?

    /// A hint with the given fields; nil leaves a field unset.
    public init(
        lastAuthenticatorId: String? = nil, lastWallet: String? = nil, lastLoginAt: Int64? = nil
    ) {
        self.lastAuthenticatorId = lastAuthenticatorId
        self.lastWallet = lastWallet
        self.lastLoginAt = lastLoginAt
    }

    /// The hint with no field set: what a read answers when no store holds one.
    public static let empty = RecoveryHint()
    /// Whether no field is set (`set` refuses such a hint).
    public var isEmpty: Bool { self == .empty }

    /// The fields of `changes` that are set replace ours; the rest stay.
    public func merging(_ changes: RecoveryHint) -> RecoveryHint {
        RecoveryHint(
            lastAuthenticatorId: changes.lastAuthenticatorId ?? lastAuthenticatorId,
            lastWallet: changes.lastWallet ?? lastWallet,
            lastLoginAt: changes.lastLoginAt ?? lastLoginAt)
    }

    /// The longest string field, in bytes of UTF-8 (a character may take up to 4, and one
    /// user-perceived character any number: the limit is on what is stored).
    public static let maximumFieldLength = 256
    /// The latest accepted `lastLoginAt` (year 3000), in milliseconds.
    public static let latestLoginAt: Int64 = 32_503_680_000_000

    /// Checks every field; a violation names the field and why.
    public func validate() throws(HintError) {
        for (name, value) in [
            ("lastAuthenticatorId", lastAuthenticatorId), ("lastWallet", lastWallet),
        ] {
            guard let value else { continue }
            if value.isEmpty { throw HintError(.invalidField, "\(name) is empty") }
            if value.utf8.count > Self.maximumFieldLength {
                throw HintError(
                    .invalidField,
                    "\(name) is longer than \(Self.maximumFieldLength) bytes of UTF-8")
            }
            if value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw HintError(.invalidField, "\(name) contains a control character")
            }
            // A bidirectional override or isolate would show a welcome screen another name
            // than the one stored.
            if value.unicodeScalars.contains(where: { $0.properties.isBidiControl }) {
                throw HintError(
                    .invalidField, "\(name) contains a bidirectional formatting character")
            }
        }
        if let lastWallet, !Self.isAddress(lastWallet) {
            throw HintError(.invalidField, "lastWallet must be an address: 0x and 40 hex digits")
        }
        if let lastLoginAt, lastLoginAt < 0 || lastLoginAt > Self.latestLoginAt {
            throw HintError(.invalidField, "lastLoginAt must be milliseconds between 1970 and 3000")
        }
    }

    /// An EVM address: `0x` and 40 hex digits (either case), as the wallet's `Address` type.
    public static func isAddress(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard utf8.count == 42, utf8[0] == UInt8(ascii: "0"), utf8[1] == UInt8(ascii: "x") else {
            return false
        }
        return utf8.dropFirst(2).allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0)
        }
    }

    /// Canonical JSON: the set fields only, keys sorted.
    public func json() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try! encoder.encode(self)
    }

    /// Strict decoding: an object with only the three known fields, of the right types, valid.
    public static func decode(json data: Data) throws(HintError) -> RecoveryHint {
        let fields: [String: Any]
        do { fields = try StrictJSON.object(data, maximumDepth: 2) } catch {
            throw HintError(.malformed, "the hint is not a JSON object of distinct keys: \(error)")
        }
        let known: Set<String> = ["lastAuthenticatorId", "lastWallet", "lastLoginAt"]
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw HintError(.invalidField, "unknown field \(unknown)")
        }
        // Types are checked by JSONDecoder: a number is not a string, true or 1.5 is not an Int64.
        let hint: RecoveryHint
        do {
            hint = try JSONDecoder().decode(RecoveryHint.self, from: data)
        } catch let DecodingError.typeMismatch(_, context) {
            throw HintError(
                .invalidField,
                "\(context.codingPath.first?.stringValue ?? "a field") has the wrong type")
        } catch let DecodingError.dataCorrupted(context) {
            throw HintError(
                .invalidField, "\(context.codingPath.first?.stringValue ?? "a field") is not valid")
        } catch {
            throw HintError(.malformed, "the hint does not decode")
        }
        try hint.validate()
        return hint
    }
}

/// Whose codes `HintError`'s are.
public enum HintErrorDomain {}

/// The one error type of the RecoveryHint module. Compares by code.
public typealias HintError = CodedError<HintErrorDomain>

extension ErrorCode<HintErrorDomain> {
    /// `set` with no field: refused, nothing touched.
    public static var empty: Self { Self("empty hint") }
    /// A field that breaks its rule (empty, too long, a control character, not an address, out of
    /// range, the wrong JSON type) or that the hint does not have.
    public static var invalidField: Self { Self("invalid field") }
    /// Bytes that are not a JSON object, or that do not decode as a hint.
    public static var malformed: Self { Self("malformed hint") }
    /// Neither store could be written (or read).
    public static var allStoresFailed: Self { Self("all stores failed") }
}
