import Foundation
import Testing

/// The repository root, from this file's place in it.
private let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

@Suite("SECURITY.md")
struct SecurityDocumentTests {
    @Test("every test SECURITY.md names exists")
    func claimsNameRealTests() throws {
        let document = try String(
            contentsOf: repository.appendingPathComponent("SECURITY.md"), encoding: .utf8)
        var sources = ""
        let walker = FileManager.default.enumerator(
            at: repository.appendingPathComponent("Tests"), includingPropertiesForKeys: nil)!
        for case let url as URL in walker where url.pathExtension == "swift" {
            sources += try String(contentsOf: url, encoding: .utf8)
        }
        let pattern = try NSRegularExpression(pattern: "`([^`]*›[^`]*)`")
        let references = pattern.matches(
            in: document, range: NSRange(document.startIndex..., in: document)
        ).map {
            String(document[Range($0.range(at: 1), in: document)!])
        }
        #expect(references.count > 50)
        for reference in references where reference != "Suite name › test name" {
            for part in reference.split(separator: "›") {
                // "…" abbreviates a long name: the part before it must be there.
                let fragment = part.split(separator: "…", omittingEmptySubsequences: false).first!
                    .trimmingCharacters(in: .whitespaces)
                if fragment.isEmpty { continue }
                #expect(
                    sources.contains(fragment),
                    "SECURITY.md names a test that does not exist: \(fragment)")
            }
        }
    }
}
