import Foundation
import Sealing
import Platform

#if canImport(FoundationXML)
    import FoundationXML
#endif

// The formats Preferences reads from outside: preference files (Android's XML) and backup
// bundles. Nothing here touches the device, so they build alone for the fuzzer (`scripts/fuzz`,
// target preferences).

/// Android's SharedPreferences file format: `<map><string name="k">v</string>…</map>`.
enum PreferencesXML {
    static func encode(_ values: [String: String]) -> Data {
        var xml = "<?xml version='1.0' encoding='utf-8' standalone='yes' ?>\n<map>\n"
        for key in values.keys.sorted() {
            xml += "    <string name=\"\(escape(key))\">\(escape(values[key]!))</string>\n"
        }
        xml += "</map>\n"
        return Data(xml.utf8)
    }

    /// Escapes markup, and tab, line feed and carriage return as character references, which
    /// (unlike the raw characters) survive XML's attribute and line-end normalization.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\t", "\n", "\r": out += "&#\(scalar.value);"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Reads Android's format; anything but `<map>` of `string`, `boolean`, `int`, `long` and
    /// `float` entries is refused.
    static func parse(_ bytes: Data) throws -> [String: String] {
        try XMLInput.check(bytes, "the preferences file")
        let delegate = MapParser()
        let parser = XMLParser(data: bytes)
        parser.delegate = delegate
        guard parser.parse(), delegate.error == nil else {
            throw PreferencesError(
                .invalidInput, "the preferences file is not valid: \(delegate.error ?? "XML")")
        }
        return delegate.values
    }

    private final class MapParser: NSObject, XMLParserDelegate {
        var values: [String: String] = [:]
        var error: String?
        private var currentName: String?
        private var text = ""

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
            qualifiedName: String?, attributes: [String: String] = [:]
        ) {
            switch element {
            case "map": break
            case "string":
                currentName = attributes["name"]
                text = ""
            case "boolean", "int", "long", "float":
                if let name = attributes["name"], let value = attributes["value"] {
                    values[name] = value
                }
            default: error = "unexpected element \(element)"
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(
            _ parser: XMLParser, didEndElement element: String, namespaceURI: String?,
            qualifiedName: String?
        ) {
            if element == "string", let name = currentName { values[name] = text }
            currentName = nil
        }
    }
}

/// The files of one backup or device-to-device transfer: path → bytes, as TLV records.
enum BackupBundle {
    static func encode(_ files: [String: Data]) -> Data {
        var out = TLV(magic: Data("KAB1".utf8))
        var list = Data()
        for path in files.keys.sorted() {
            var entry = TLV(magic: Data())
            entry.append(1, path)
            entry.append(2, files[path]!)
            withUnsafeBytes(of: UInt32(entry.bytes.count).bigEndian) { list.append(contentsOf: $0) }
            list.append(entry.bytes)
        }
        out.append(1, list)
        return out.bytes
    }

    static func decode(_ bytes: Data) throws(PreferencesError) -> [String: Data] {
        do {
            let fields = try TLV.fields(bytes, magic: Data("KAB1".utf8), known: 1...1)
            var rest = Data(try fields.required(1))
            var files: [String: Data] = [:]
            while !rest.isEmpty {
                guard rest.count >= 4 else { throw SealingError(.malformed) }
                let length = rest.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                guard rest.count - 4 >= length else { throw SealingError(.malformed) }
                let entry = try TLV.fields(
                    Data(rest.dropFirst(4).prefix(length)), magic: Data(), known: 1...2)
                files[try entry.requiredString(1)] = Data(try entry.required(2))
                rest = Data(rest.dropFirst(4 + length))
            }
            return files
        } catch {
            throw PreferencesError(.corrupt, "malformed backup")
        }
    }
}
