import Device
import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Android's `SharedPreferences` for one file: `<container>/shared_prefs/<name>.xml` in Android's
/// own format (`<map><string name="k">v</string>…</map>`). Lives in the app's container, so it is
/// gone at uninstall — unless Auto Backup brings it back at reinstall.
///
/// `commit()` writes atomically. Not thread-safe by itself (like an Android editor); one instance
/// per thread, or external locking.
public struct SharedPreferences: Sendable {
    public let app: App
    public let name: String
    public private(set) var values: [String: String] = [:]

    public var file: URL {
        app.container.appendingPathComponent("shared_prefs").appendingPathComponent(name + ".xml")
    }

    /// Opens (and reads) the file; a missing file is empty preferences.
    public init(app: App, name: String) throws {
        guard !name.isEmpty, !name.contains("/"), !name.contains("..") else {
            throw PreferencesError("invalid preferences name")
        }
        self.app = app
        self.name = name
        if let bytes = try Files.read(file) { values = try Self.parse(bytes) }
    }

    public func string(forKey key: String) -> String? { values[key] }
    public mutating func putString(_ value: String, forKey key: String) { values[key] = value }
    public mutating func remove(_ key: String) { values[key] = nil }

    /// Mirrors `Editor.commit()`: writes the file atomically (0600; directories 0700).
    public func commit() throws {
        var xml = "<?xml version='1.0' encoding='utf-8' standalone='yes' ?>\n<map>\n"
        for key in values.keys.sorted() {
            xml +=
                "    <string name=\"\(Self.escape(key))\">\(Self.escape(values[key]!))</string>\n"
        }
        xml += "</map>\n"
        try Files.writeAtomically(Data(xml.utf8), to: file)
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(
            of: "<", with: "&lt;"
        )
        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func parse(_ bytes: Data) throws -> [String: String] {
        try XMLInput.check(bytes, "the preferences file")
        let delegate = MapParser()
        let parser = XMLParser(data: bytes)
        parser.delegate = delegate
        guard parser.parse(), delegate.error == nil else {
            throw PreferencesError("the preferences file is not valid: \(delegate.error ?? "XML")")
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
