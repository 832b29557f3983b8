import Foundation

/// What Keepsake lets reach FoundationXML's parser from outside (a WebDAV server's answers,
/// restored backup rules and preference files). FoundationXML crashes the process on some inputs
/// (names that are not UTF-8; a processing instruction without data), and libxml2 would expand
/// entities declared in a DOCTYPE. None of Keepsake's documents needs these, so they are refused
/// before parsing. The checks run on the UTF-8 bytes, never on Swift's characters: `<?` followed
/// by a combining mark is one character to Swift and a processing instruction to libxml2
/// (found by scripts/fuzz; Fixtures/fuzz/preferences/ keeps the input).
package enum UntrustedXML {
    /// Why `xml` may not be parsed, or nil when it may.
    package static func refusal(_ xml: Data) -> String? {
        guard String(data: xml, encoding: .utf8) != nil else { return "not valid UTF-8" }
        var bytes = [UInt8](xml)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        bytes = bytes.drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        // One XML declaration may open the document: `<?xml version="…"` … `?>`, ASCII, with no
        // `<`, `>` or `?` inside (a bare `<?xml?>` is a processing instruction without data).
        if bytes.starts(with: Array("<?xml".utf8)), let end = firstRange(of: "?>", in: bytes) {
            let declaration = String(decoding: bytes[..<end.upperBound], as: UTF8.self)
            let pattern = #"^<\?xml\s+version\s*=\s*("[^"<>?]*"|'[^'<>?]*')[^<>?]*\?>$"#
            guard declaration.utf8.allSatisfy({ $0 < 0x80 }),
                declaration.range(of: pattern, options: .regularExpression) != nil
            else { return "a malformed XML declaration" }
            bytes = bytes[end.upperBound...]
        }
        if firstRange(of: "<?", in: bytes) != nil {
            return "processing instructions are not allowed"
        }
        // `<!` opens a comment, a CDATA section, or a declaration (DOCTYPE, ENTITY, …).
        var rest = bytes
        while let open = firstRange(of: "<!", in: rest) {
            let after = rest[open.upperBound...]
            guard after.starts(with: Array("--".utf8)) || after.starts(with: Array("[CDATA[".utf8))
            else { return "DOCTYPE and other declarations are not allowed" }
            rest = after
        }
        return nil
    }

    private static func firstRange(of needle: String, in bytes: ArraySlice<UInt8>) -> Range<Int>? {
        let pattern = Array(needle.utf8)
        guard bytes.count >= pattern.count else { return nil }
        var index = bytes.startIndex
        while index <= bytes.endIndex - pattern.count {
            if bytes[index] == pattern[0],
                bytes[index..<index + pattern.count].elementsEqual(pattern)
            {
                return index..<index + pattern.count
            }
            index += 1
        }
        return nil
    }
}
