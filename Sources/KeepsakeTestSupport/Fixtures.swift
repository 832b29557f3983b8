import Foundation

/// The repository's `Fixtures/` directory (test vectors and sample data as data files).
public let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// Decodes `Fixtures/<path>` (JSON) as `T`.
public func loadFixture<T: Decodable>(_ type: T.Type, _ path: String) throws -> T {
    try JSONDecoder().decode(
        T.self, from: Data(contentsOf: fixturesDirectory.appendingPathComponent(path)))
}

/// Lower-case hex of `data`.
public func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

/// The bytes of a hex string (test vectors are well-formed; a bad digit traps).
public func fromHex(_ string: String) -> Data {
    var data = Data()
    var index = string.startIndex
    while index < string.endIndex {
        let next = string.index(index, offsetBy: 2)
        data.append(UInt8(string[index..<next], radix: 16)!)
        index = next
    }
    return data
}
