import Device
import Foundation
import Platform

/// Android's `SharedPreferences` for one file: `<container>/shared_prefs/<name>.xml` in Android's
/// own format (`<map><string name="k">v</string>…</map>`). Lives in the app's container, so it is
/// gone at uninstall — unless Auto Backup brings it back at reinstall.
///
/// `commit()` writes atomically. Not thread-safe by itself (like an Android editor); one instance
/// per thread, or external locking.
public struct SharedPreferences: Sendable {
    /// The app whose container holds the file.
    public let app: App
    /// The preferences' name: the file is `shared_prefs/<name>.xml`.
    public let name: String
    /// Every key's value as read at init and changed since; `commit()` writes them.
    public private(set) var values: [String: String] = [:]

    /// `<container>/shared_prefs/<name>.xml`.
    public var file: URL {
        app.container.appendingPathComponent("shared_prefs").appendingPathComponent(name + ".xml")
    }

    /// Opens (and reads) the file; a missing file is empty preferences.
    public init(app: App, name: String) throws {
        guard !name.isEmpty, !name.contains("/"), !name.contains("..") else {
            throw PreferencesError(.invalidInput, "invalid preferences name")
        }
        self.app = app
        self.name = name
        if let bytes = try Files.read(file) { values = try PreferencesXML.parse(bytes) }
    }

    /// Mirrors `getString(key, null)`: the value, or nil when the key is absent.
    public func string(forKey key: String) -> String? { values[key] }
    /// Mirrors `Editor.putString`: sets the value here; `commit()` writes it.
    public mutating func putString(_ value: String, forKey key: String) { values[key] = value }
    /// Mirrors `Editor.remove`: removes the key here; `commit()` writes the removal.
    public mutating func remove(_ key: String) { values[key] = nil }

    /// Mirrors `Editor.commit()`: writes the file atomically (0600; directories 0700).
    public func commit() throws {
        try Files.writeAtomically(PreferencesXML.encode(values), to: file)
    }
}
