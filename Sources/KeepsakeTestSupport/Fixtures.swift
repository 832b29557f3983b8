import Foundation
import Sealing

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
public func hex(_ data: Data) -> String { data.hexString }

/// The bytes of a hex string (test vectors are well-formed; a bad digit traps).
public func fromHex(_ string: String) -> Data { Data(hexString: string)! }
