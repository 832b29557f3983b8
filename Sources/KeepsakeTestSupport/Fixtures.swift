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
        throw FixtureError(
            path: path, message: "\(table.count) cases; at least \(minimum) expected")
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

/// A valid wallet address (`0x` + 40 hex digits) for tests, the same for the same `seed` and
/// distinct between seeds. Mixed case, with an upper-case letter every 4 characters, so that no
/// 8-character window of it is plain lower-case hex — which the suite-wide sweep would otherwise
/// meet by chance in hex file names.
package func testWallet(_ seed: String) -> String {
    let digest = KeyDerivation.keyedHash(
        key: SecureBytes(copying: Data(repeating: 0x57, count: 32)),
        context: "keepsake.test.wallet",
        Data(seed.utf8)
    ).unsafeData().hexString
    let letters = Array("ABCDEF")
    var out = "0x"
    for (index, character) in digest.prefix(40).enumerated() {
        if index % 4 == 0, let digit = character.wholeNumberValue {
            out.append(letters[digit % 6])
        } else {
            out.append(index % 2 == 0 ? Character(character.uppercased()) : character)
        }
    }
    return out
}

/// The wallet the demo's phone records (and the tests that retell the demo): a valid address.
package let demoWallet = "0x8A3fC1d2E4b5A6c7D8e9F0a1B2c3D4e5F6a7B83F"
