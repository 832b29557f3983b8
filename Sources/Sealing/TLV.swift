import Foundation
import Platform

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
        let appended: Void? = value.withContiguousStorageIfAvailable {
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

    /// The fields of a record, by tag: where each value lies in the parsed bytes (kept inline, no
    /// allocation per record: a read-all parses two records per item). Values are read straight
    /// from the bytes; `subscript` hands one out as a `Data` slice of them.
    package struct Fields: Sendable {
        private let bytes: Data
        /// Per tag, the value's offset from `bytes.startIndex` (high 32 bits) and length (low 32),
        /// or -1 when the tag is absent.
        private var spans = InlineArray<32, Int64>(repeating: -1)

        fileprivate init(_ bytes: Data) { self.bytes = bytes }

        fileprivate func has(_ tag: UInt8) -> Bool { spans[Int(tag)] >= 0 }

        fileprivate mutating func set(_ tag: UInt8, offset: Int, length: Int) {
            spans[Int(tag)] = Int64(offset) << 32 | Int64(length)
        }

        private func range(_ tag: UInt8) -> Range<Int>? {
            let span = spans[Int(tag)]
            guard span >= 0 else { return nil }
            let offset = Int(span >> 32)
            return offset..<(offset + Int(span & 0xFFFF_FFFF))
        }

        /// `body` over the value's bytes, or nil when the tag is absent.
        private func withValue<R>(_ tag: UInt8, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
            guard let range = range(tag) else { return nil }
            return bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
        }

        package subscript(tag: UInt8) -> Data? {
            range(tag).map {
                bytes[(bytes.startIndex + $0.lowerBound)..<(bytes.startIndex + $0.upperBound)]
            }
        }

        package func string(_ tag: UInt8) throws(SealingError) -> String? {
            guard let value = withValue(tag, TLV.utf8) else { return nil }
            guard let value else { throw SealingError(.malformed, "invalid UTF-8") }
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
            guard let byte = withValue(tag, { $0.count == 1 && $0[0] <= 1 ? $0[0] : nil }) else {
                return nil
            }
            guard let byte else { throw SealingError(.malformed, "bad boolean") }
            return byte == 1
        }

        package func int64(_ tag: UInt8) throws(SealingError) -> Int64? {
            let read = withValue(tag) { value -> Int64? in
                guard value.count == 8 else { return nil }
                return Int64(bitPattern: value.reduce(0) { $0 << 8 | UInt64($1) })
            }
            guard let read else { return nil }
            guard let read else { throw SealingError(.malformed, "bad integer") }
            return read
        }
    }

    /// `bytes` as a string, or nil when they are not valid UTF-8: decoded (invalid sequences
    /// repaired to U+FFFD, which is valid and so never equal to what it replaced), then kept only if
    /// its UTF-8 is the same bytes. (`String(validating:as:)` looked up generic metadata on every
    /// call, under a runtime lock: a tenth of a read-all's opening time.)
    private static func utf8(_ bytes: UnsafeRawBufferPointer) -> String? {
        let units = bytes.assumingMemoryBound(to: UInt8.self)
        var decoded = String(decoding: units, as: UTF8.self)
        let same = decoded.withUTF8 { utf8 in
            utf8.count == units.count
                && (units.isEmpty
                    || memcmp(utf8.baseAddress!, units.baseAddress!, units.count) == 0)
        }
        return same ? decoded : nil
    }

    /// Parses `bytes`; only tags in `known` are allowed. Reads the layout through one raw buffer:
    /// a read-all parses a record per item, and subscripting `Data` byte by byte costs far more.
    package static func fields(_ bytes: Data, magic: Data, known: ClosedRange<UInt8>)
        throws(SealingError)
        -> Fields
    {
        guard bytes.count <= Int(Int32.max) else { throw SealingError(.malformed, "too large") }
        var fields = Fields(bytes)
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
                guard !fields.has(tag) else { return SealingError(.malformed, "repeated field") }
                fields.set(tag, offset: start, length: length)
                offset = start + length
            }
            return nil
        }
        if let failure { throw failure }
        return fields
    }
}
