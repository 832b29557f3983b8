import Foundation

/// The tag-length-value layout of Keepsake's records: a 4-byte magic, then fields as tag (1 byte,
/// below 32), length (4 bytes, big endian), value. Every tag at most once; unknown tags,
/// truncation and trailing bytes are refused. Shared by every store's record formats.
package struct TLV: Sendable {
    package private(set) var bytes: Data

    package init(magic: Data) {
        bytes = Data(capacity: 256)
        bytes.append(magic)
    }

    package mutating func append(_ tag: UInt8, _ value: some Collection<UInt8>) {
        let appended = value.withContiguousStorageIfAvailable {
            append(tag, UnsafeRawBufferPointer($0))
        }
        if appended == nil { append(tag, Array(value)) }
    }

    /// The one place a field is written: from contiguous bytes (a generic `Data.append` costs a
    /// dynamic cast per call).
    private mutating func append(_ tag: UInt8, _ value: UnsafeRawBufferPointer) {
        precondition(tag < 32 && value.count <= Int(UInt32.max))
        let count = UInt32(value.count)
        let header: [UInt8] = [
            tag, UInt8(truncatingIfNeeded: count >> 24), UInt8(truncatingIfNeeded: count >> 16),
            UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count),
        ]
        bytes.append(contentsOf: header)
        if let base = value.baseAddress, value.count > 0 {
            bytes.append(base.assumingMemoryBound(to: UInt8.self), count: value.count)
        }
    }

    package mutating func append(_ tag: UInt8, _ value: String) {
        var value = value
        value.withUTF8 { append(tag, UnsafeRawBufferPointer($0)) }
    }
    package mutating func append(_ tag: UInt8, _ value: Bool) { append(tag, [value ? 1 : 0]) }
    package mutating func append(_ tag: UInt8, _ value: Int64) {
        withUnsafeBytes(of: value.bigEndian) { append(tag, $0) }
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

    /// Parses `bytes`; only tags in `known` are allowed. Reads the layout through one raw buffer
    /// (subscripting `Data` byte by byte was a third of a read-all's own time).
    package static func fields(_ bytes: Data, magic: Data, known: ClosedRange<UInt8>)
        throws(SealingError)
        -> Fields
    {
        var fields = Fields()
        let failure: SealingError? = bytes.withUnsafeBytes { raw in
            guard raw.count >= magic.count, raw.prefix(magic.count).elementsEqual(magic) else {
                return SealingError(.malformed, "unknown header")
            }
            var offset = magic.count
            while offset < raw.count {
                guard raw.count - offset >= 5, raw[offset] < 32, known.contains(raw[offset]) else {
                    return SealingError(.malformed, "bad field header")
                }
                let tag = raw[offset]
                let length =
                    Int(raw[offset + 1]) << 24 | Int(raw[offset + 2]) << 16
                    | Int(raw[offset + 3]) << 8 | Int(raw[offset + 4])
                let start = offset + 5
                guard length <= raw.count - start else {
                    return SealingError(.malformed, "truncated field")
                }
                guard fields[tag] == nil else { return SealingError(.malformed, "repeated field") }
                let first = bytes.startIndex + start
                fields[tag] = bytes[first..<(first + length)]
                offset = start + length
            }
            return nil
        }
        if let failure { throw failure }
        return fields
    }
}
