import Foundation

/// The tag-length-value layout of Keepsake's records: a 4-byte magic, then fields as tag (1 byte,
/// below 32), length (4 bytes, big endian), value. Every tag at most once; unknown tags,
/// truncation and trailing bytes are refused. Shared by every store's record formats.
package struct TLV: Sendable {
    package private(set) var bytes: Data

    package init(magic: Data) { bytes = magic }

    package mutating func append(_ tag: UInt8, _ value: some Collection<UInt8>) {
        precondition(tag < 32)
        bytes.append(tag)
        withUnsafeBytes(of: UInt32(value.count).bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: value)
    }

    package mutating func append(_ tag: UInt8, _ value: String) { append(tag, Array(value.utf8)) }
    package mutating func append(_ tag: UInt8, _ value: Bool) { append(tag, [value ? 1 : 0]) }
    package mutating func append(_ tag: UInt8, _ value: Int64) {
        withUnsafeBytes(of: value.bigEndian) { append(tag, Array($0)) }
    }

    /// The fields of a record, by tag.
    package struct Fields: Sendable {
        private var values = [Data?](repeating: nil, count: 32)
        package subscript(tag: UInt8) -> Data? {
            get { values[Int(tag)] }
            set { values[Int(tag)] = newValue }
        }

        package func string(_ tag: UInt8) throws(SealingError) -> String? {
            guard let field = self[tag] else { return nil }
            guard let value = String(data: field, encoding: .utf8) else {
                throw SealingError(.malformed, "invalid UTF-8")
            }
            return value
        }

        package func requiredString(_ tag: UInt8) throws(SealingError) -> String {
            guard let value = try string(tag) else {
                throw SealingError(.malformed, "missing field \(tag)")
            }
            return value
        }

        package func required(_ tag: UInt8) throws(SealingError) -> Data {
            guard let value = self[tag] else {
                throw SealingError(.malformed, "missing field \(tag)")
            }
            return value
        }

        package func bool(_ tag: UInt8) throws(SealingError) -> Bool? {
            guard let field = self[tag] else { return nil }
            guard field.count == 1, field.first! <= 1 else {
                throw SealingError(.malformed, "bad boolean")
            }
            return field.first! == 1
        }

        package func int64(_ tag: UInt8) throws(SealingError) -> Int64? {
            guard let field = self[tag] else { return nil }
            guard field.count == 8 else { throw SealingError(.malformed, "bad integer") }
            return Int64(bitPattern: field.reduce(0) { $0 << 8 | UInt64($1) })
        }
    }

    /// Parses `bytes`; only tags in `known` are allowed.
    package static func fields(_ bytes: Data, magic: Data, known: ClosedRange<UInt8>)
        throws(SealingError)
        -> Fields
    {
        guard bytes.starts(with: magic) else { throw SealingError(.malformed, "unknown header") }
        var fields = Fields()
        var index = bytes.startIndex + magic.count
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 5, known.contains(bytes[index]), bytes[index] < 32
            else {
                throw SealingError(.malformed, "bad field header")
            }
            let tag = bytes[index]
            let length = bytes[(index + 1)..<(index + 5)].reduce(0) { $0 << 8 | Int($1) }
            let start = index + 5
            guard length <= bytes.endIndex - start else {
                throw SealingError(.malformed, "truncated field")
            }
            guard fields[tag] == nil else { throw SealingError(.malformed, "repeated field") }
            fields[tag] = bytes[start..<(start + length)]
            index = start + length
        }
        return fields
    }
}
