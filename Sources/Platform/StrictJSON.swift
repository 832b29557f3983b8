import Foundation

/// JSON from outside (a hint payload, the C interface's options), read strictly: a document whose
/// objects repeat a key is refused — `JSONSerialization` would keep one of the two values, and
/// which one a reader sees must never depend on the parser. Keys compare as their bytes once
/// unescaped (`"a"` and `"\u0061"` are one key; `"caf\u00e9"` and `"cafe\u0301"` are two).
package enum StrictJSON {
    /// Why a document was refused.
    package struct Refusal: Error, CustomStringConvertible {
        package let description: String
    }

    /// The document's top-level object, refused when it is not one, does not parse, nests deeper
    /// than `maximumDepth`, or repeats a key in any of its objects.
    package static func object(_ data: Data, maximumDepth: Int = 64) throws(Refusal)
        -> [String: Any]
    {
        let topLevelKeys = try checkKeys(data, maximumDepth: maximumDepth)
        guard let object = try? JSONSerialization.jsonObject(with: data),
            let fields = object as? [String: Any]
        else { throw Refusal(description: "not a JSON object") }
        // Keys distinct as bytes that a Swift dictionary takes for one (canonically equivalent:
        // "caf\u00e9", "cafe\u0301") were merged by the parser: refused, never one of the two.
        guard fields.count == topLevelKeys else {
            throw Refusal(description: "two keys that differ only in Unicode normalization")
        }
        return fields
    }

    /// Scans `data` once: every object's keys distinct, nesting at most `maximumDepth`. Invalid
    /// JSON is left to the parser that follows (this scan only needs to be right on valid JSON).
    /// The number of keys of the top-level object.
    @discardableResult
    package static func checkKeys(_ data: Data, maximumDepth: Int = 64) throws(Refusal) -> Int {
        let bytes = [UInt8](data)
        // One entry per open container: the keys seen so far (nil for an array).
        var open: [Set<[UInt8]>?] = []
        var index = 0
        var expectingKey = false
        var topLevelKeys = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                open.append([])
                expectingKey = true
                index += 1
            case UInt8(ascii: "["):
                open.append(nil)
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !open.isEmpty { open.removeLast() }
                expectingKey = false
                index += 1
            case UInt8(ascii: ","):
                expectingKey = open.last.map { $0 != nil } ?? false
                index += 1
            case UInt8(ascii: "\""):
                guard let (text, end) = string(bytes, from: index) else { return topLevelKeys }
                if expectingKey, let keys = open.last, var seen = keys {
                    guard seen.insert(text).inserted else {
                        throw Refusal(
                            description:
                                "a key appears twice in one object: \(String(decoding: text, as: UTF8.self).debugDescription)"
                        )
                    }
                    open[open.count - 1] = seen
                    if open.count == 1 { topLevelKeys += 1 }
                    expectingKey = false
                }
                index = end
            default:
                index += 1
            }
            if open.count > maximumDepth {
                throw Refusal(description: "nested deeper than \(maximumDepth)")
            }
        }
        return topLevelKeys
    }

    /// The unescaped UTF-8 bytes of the string starting at `start` (its opening quote), and the
    /// index after its closing quote; nil when it does not end or an escape is invalid.
    private static func string(_ bytes: [UInt8], from start: Int) -> ([UInt8], Int)? {
        var out: [UInt8] = []
        var index = start + 1
        var pendingHigh: UInt32?
        func append(_ scalar: UInt32) {
            guard let unicode = Unicode.Scalar(scalar) else { return lone(scalar) }
            out.append(contentsOf: Array(String(Character(unicode)).utf8))
        }
        // A lone surrogate keeps its code unit as the key's identity (0xFF is never UTF-8).
        func lone(_ code: UInt32) { out += [0xFF, UInt8(code >> 8), UInt8(code & 0xFF)] }
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                if let high = pendingHigh { append(high) }
                return (out, index + 1)
            }
            if byte != UInt8(ascii: "\\") {
                if let high = pendingHigh {
                    append(high)
                    pendingHigh = nil
                }
                out.append(byte)
                index += 1
                continue
            }
            guard index + 1 < bytes.count else { return nil }
            let escape = bytes[index + 1]
            if escape == UInt8(ascii: "u") {
                guard index + 6 <= bytes.count,
                    let code = UInt32(
                        String(decoding: bytes[index + 2..<index + 6], as: UTF8.self), radix: 16)
                else { return nil }
                if let high = pendingHigh {
                    pendingHigh = nil
                    if (0xDC00...0xDFFF).contains(code) {
                        append(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
                        index += 6
                        continue
                    }
                    append(high)
                }
                if (0xD800...0xDBFF).contains(code) {
                    pendingHigh = code
                } else {
                    append(code)
                }
                index += 6
                continue
            }
            if let high = pendingHigh {
                append(high)
                pendingHigh = nil
            }
            let simple: [UInt8: UInt8] = [
                UInt8(ascii: "\""): 0x22, UInt8(ascii: "\\"): 0x5C, UInt8(ascii: "/"): 0x2F,
                UInt8(ascii: "b"): 0x08, UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A,
                UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09,
            ]
            guard let unescaped = simple[escape] else { return nil }
            out.append(unescaped)
            index += 2
        }
        return nil
    }
}
