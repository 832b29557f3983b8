import Foundation

/// What Keepsake lets reach FoundationXML's parser. FoundationXML crashes the process on some
/// inputs (names that are not UTF-8; a processing instruction without data), and libxml2 would
/// expand entities declared in a DOCTYPE. Backup rules and preference files need none of these, so
/// they are refused up front. Found by scripts/fuzz; Fixtures/fuzz/backup-rules/ keeps the inputs.
enum XMLInput {
    static func check(_ xml: Data, _ what: String) throws(PreferencesError) {
        guard var text = String(data: xml, encoding: .utf8) else {
            throw PreferencesError(.invalidInput, "\(what): not valid UTF-8 (XML)")
        }
        text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        // One XML declaration may open the document: `<?xml version="…"` … `?>`, no `<` or `?`
        // inside (a bare `<?xml?>` is a processing instruction without data to the parser).
        let declarationPattern = #"^<\?xml\s+version\s*=\s*(\"[^\"<>?]*\"|'[^'<>?]*')[^<>?]*\?>"#
        if let declaration = text.range(of: declarationPattern, options: .regularExpression) {
            text = String(text[declaration.upperBound...])
        }
        if text.contains("<?") {
            throw PreferencesError(
                .invalidInput, "\(what): processing instructions are not allowed (XML)")
        }
        if text.contains("<!DOCTYPE") || text.contains("<!ENTITY") {
            throw PreferencesError(
                .invalidInput, "\(what): DOCTYPE and entity declarations are not allowed (XML)")
        }
    }
}
