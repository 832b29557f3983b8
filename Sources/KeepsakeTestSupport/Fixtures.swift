import Foundation
import Sealing

/// The repository's `Fixtures/` directory (test vectors and sample data as data files).
package let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Fixtures")

/// Decodes `Fixtures/<path>` (JSON) as `T`.
package func loadFixture<T: Decodable>(_ type: T.Type, _ path: String) throws -> T {
    try JSONDecoder().decode(
        T.self, from: Data(contentsOf: fixturesDirectory.appendingPathComponent(path)))
}

/// Lower-case hex of `data`.
package func hex(_ data: Data) -> String { data.hexString }

/// The bytes of a hex string (test vectors are well-formed; a bad digit traps).
package func fromHex(_ string: String) -> Data { Data(hexString: string)! }

/// Damaged copies of a sealed value, for exhaustive tamper tests.
package enum Tampered {
    /// Every single-bit flip at every byte position: 8 × `bytes.count` copies.
    package static func singleBitFlips(of bytes: Data) -> LazyMapSequence<Range<Int>, Data> {
        (0..<bytes.count * 8).lazy.map { flip in
            var flipped = bytes
            flipped[flipped.startIndex + flip / 8] ^= UInt8(1 << (flip % 8))
            return flipped
        }
    }

    /// Every proper prefix (the empty one included) and one extension by a zero byte.
    package static func truncationsAndExtension(of bytes: Data) -> [Data] {
        (0..<bytes.count).map { Data(bytes.prefix($0)) } + [bytes + [0]]
    }
}
