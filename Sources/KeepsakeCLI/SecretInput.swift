import Foundation
import Glibc
import Sealing

/// Passcodes from standard input: read straight into owned, locked memory (never a `String` or
/// an ordinary `Data`), split into lines without their line ends, each line in owned memory of
/// its own. The read buffer is wiped when it is released.
enum SecretInput {
    /// The most standard input a passcode command reads.
    static let maximum = 64 * 1024

    /// Standard input (at most `maximum` bytes) in owned memory, and how much of it was read.
    private static func readAll() throws(CommandError) -> (buffer: SecureBytes, length: Int) {
        var length = 0
        var overflow = false
        let buffer = SecureBytes(count: maximum) { out in
            while length < out.count {
                let got = read(0, out.baseAddress! + length, out.count - length)
                if got < 0 && errno == EINTR { continue }
                if got <= 0 { break }
                length += got
            }
            if length == out.count {
                var probe: UInt8 = 0
                overflow = read(0, &probe, 1) == 1
                probe = 0
            }
        }
        if overflow {
            throw CommandError.param("standard input is longer than \(maximum) bytes")
        }
        return (buffer, length)
    }

    static func lines() throws(CommandError) -> [SecureBytes] {
        try leadingLines(Int.max).lines
    }

    /// The first `count` lines of standard input (credentials), each in owned memory without its
    /// line end, and the rest as it came (an item's secret, which leaves as `Data` anyway).
    static func leadingLines(_ count: Int) throws(CommandError) -> (
        lines: [SecureBytes], rest: Data
    ) {
        let (buffer, length) = try readAll()
        return buffer.withUnsafeBytes { all in
            let input = UnsafeRawBufferPointer(rebasing: all[0..<length])
            var lines: [SecureBytes] = []
            var start = 0
            func take(_ end: Int) {
                var stop = end
                if stop > start && input[stop - 1] == UInt8(ascii: "\r") { stop -= 1 }
                let line = UnsafeRawBufferPointer(rebasing: input[start..<stop])
                lines.append(SecureBytes(count: line.count) { $0.copyMemory(from: line) })
            }
            for index in 0..<input.count where input[index] == UInt8(ascii: "\n") {
                guard lines.count < count else { break }
                take(index)
                start = index + 1
            }
            if lines.count < count && start < input.count {
                take(input.count)
                start = input.count
            }
            return (lines, Data(input[start...]))
        }
    }
}
