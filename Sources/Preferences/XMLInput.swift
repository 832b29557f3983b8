import Foundation
import Platform
import Sealing

/// Backup rules and preference files are checked as untrusted XML (`UntrustedXML`) before
/// FoundationXML parses them.
enum XMLInput {
    static func check(_ xml: Data, _ what: String) throws(PreferencesError) {
        if let refusal = UntrustedXML.refusal(xml) {
            throw PreferencesError(.invalidInput, "\(what): \(refusal) (XML)")
        }
    }
}
