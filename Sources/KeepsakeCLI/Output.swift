import Foundation

package enum Output {
    package static func json(_ value: Any) {
        let data = try! JSONSerialization.data(
            withJSONObject: value,
            options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    package static func raw(_ data: Data) { FileHandle.standardOutput.write(data) }

    package static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    package static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
