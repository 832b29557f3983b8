import Foundation

extension Data {
    /// Lower-case hex (keyed-hash object names, one-time transfer keys).
    package var hexString: String { map { String(format: "%02x", $0) }.joined() }

    /// The bytes of a hex string, or nil when it is not hex.
    package init?(hexString string: String) {
        guard string.count % 2 == 0 else { return nil }
        var data = Data()
        var index = string.startIndex
        while index < string.endIndex {
            let next = string.index(index, offsetBy: 2)
            guard let byte = UInt8(string[index..<next], radix: 16) else { return nil }
            data.append(byte)
            index = next
        }
        self = data
    }
}
