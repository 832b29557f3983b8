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

/// The cases of a fixture-driven table: `Fixtures/<path>` decoded as `T`, its cases taken by
/// `cases`. A missing, undecodable or empty fixture throws, so a table never passes with zero cases
/// (`@Test(arguments: try fixtureTable(…))` reports the error as the test's failure).
package func fixtureTable<T: Decodable, Case>(
    _ type: T.Type, _ path: String, _ cases: (T) -> [Case], atLeast minimum: Int = 1
) throws -> [Case] {
    let table = cases(try loadFixture(type, path))
    guard table.count >= minimum else {
        throw FixtureError(path: path, message: "\(table.count) cases; at least \(minimum) expected")
    }
    return table
}

/// A fixture that cannot drive its table.
package struct FixtureError: Error, CustomStringConvertible {
    package let path: String
    package let message: String
    package var description: String { "Fixtures/\(path): \(message)" }
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
