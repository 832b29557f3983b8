import Foundation

/// The tag-length-value layout of Keepsake's records: a 4-byte magic, then fields as tag (1 byte),
/// length (4 bytes, big endian), value. Every tag at most once; unknown tags, truncation and
/// trailing bytes are refused.
struct TLV {
    private(set) var bytes: Data

    init(magic: Data) { bytes = magic }

    mutating func append(_ tag: UInt8, _ value: some Collection<UInt8>) {
        bytes.append(tag)
        withUnsafeBytes(of: UInt32(value.count).bigEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: value)
    }

    /// The fields of `bytes`, by tag (a small array indexed by tag: records are decoded once per
    /// item of a read-all, so no dictionary).
    static func fields(_ bytes: Data, magic: Data, knownTags: ClosedRange<UInt8>) throws(KeychainError)
        -> Fields
    {
        guard bytes.starts(with: magic) else { throw malformed("unknown header") }
        var fields = Fields()
        var index = bytes.startIndex + magic.count
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 5, knownTags.contains(bytes[index]) else {
                throw malformed("bad field header")
            }
            let tag = bytes[index]
            let length = bytes[(index + 1)..<(index + 5)].reduce(0) { $0 << 8 | Int($1) }
            let start = index + 5
            guard length <= bytes.endIndex - start else { throw malformed("truncated field") }
            guard fields[tag] == nil else { throw malformed("repeated field") }
            fields[tag] = bytes[start..<(start + length)]
            index = start + length
        }
        return fields
    }

    struct Fields {
        private var values = [Data?](repeating: nil, count: 16)
        subscript(tag: UInt8) -> Data? {
            get { values[Int(tag)] }
            set { values[Int(tag)] = newValue }
        }
    }

    static func malformed(_ why: String) -> KeychainError {
        KeychainError(KeychainError.decode, "malformed Keepsake record: \(why)")
    }
}
