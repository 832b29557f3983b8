import CloudAccount
import Device
import Foundation
import Keychain
import Platform
import Sealing

/// Where an opened app (`OpenedApp`) finds a WebDAV cloud's credentials: a Keychain item of Keepsake's own
/// (`keepsake cloud login`), else `~/.netrc` — never the command line or the environment.
///
/// The item: app `org.keepsake.cloud`, service `org.keepsake.cloud`, account the cloud's URL,
/// `generic` the user name, the password as its secret; `AfterFirstUnlockThisDeviceOnly`, so a
/// sync works in the background after the first unlock and the password never leaves the device.
package enum CloudCredentials {
    package struct Found {
        package var user: String
        package var password: String
        package var source: String
        /// What `cloud login` learnt of the server (kept in the item's comment; nil for
        /// `~/.netrc`, whose server is probed once per process).
        package var capabilities: WebDAVCapabilities?
    }

    package static let appID = "org.keepsake.cloud"
    package static let service = "org.keepsake.cloud"

    /// The Keychain of Keepsake's own app the items are in, on `device`.
    package static func keychain(device: Device) throws -> Keychain {
        let container = UserDirectories.container(of: appID)
        return Keychain(app: try App(id: appID, container: container), device: device)
    }

    package static func account(_ url: URL) -> String {
        url.absoluteString.hasSuffix("/") ? url.absoluteString : url.absoluteString + "/"
    }

    /// The item that holds `url`'s credentials.
    package static func query(_ url: URL) -> GenericPasswordQuery {
        GenericPasswordQuery(service: service, account: account(url))
    }

    /// The credentials for `url`, or nil when neither place has any. Only an item that is not
    /// there sends the search on to `~/.netrc`: a Secret Service that could not answer (busy, or
    /// locked) is its own error, never "no credentials" (the server's 401 would then tell the
    /// user to log in again when nothing is wrong with the login).
    package static func find(for url: URL, device: Device) throws -> Found? {
        let keychain = try keychain(device: device)
        if let item = try stored(in: keychain, for: url),
            let user = item.attributes.generic.flatMap({ String(data: $0, encoding: .utf8) }),
            let password = item.data.flatMap({ String(data: $0, encoding: .utf8) })
        {
            let capabilities = item.attributes.comment.flatMap {
                try? JSONDecoder().decode(WebDAVCapabilities.self, from: Data($0.utf8))
            }
            return Found(
                user: user, password: password, source: "keychain", capabilities: capabilities)
        }
        guard let host = url.host else { return nil }
        return try Netrc.credentials(for: host, in: UserDirectories.home)
            .map { Found(user: $0.user, password: $0.password, source: "netrc") }
    }

    /// The item with `url`'s credentials, or nil when there is none.
    private static func stored(in keychain: Keychain, for url: URL) throws -> GenericPasswordItem? {
        do {
            return try keychain.item(matching: query(url))
        } catch  where error.status == KeychainStatus.itemNotFound {
            return nil
        }
    }

    /// `keepsake cloud login`: stores (or replaces) the item.
    package static func store(
        user: String, password: SecureBytes, capabilities: WebDAVCapabilities, for url: URL,
        keychain: Keychain
    ) throws {
        try? keychain.delete(matching: query(url))
        let learnt = String(decoding: try JSONEncoder().encode(capabilities), as: UTF8.self)
        try keychain.add(
            GenericPasswordAttributes(
                service: service, account: account(url),
                accessible: .afterFirstUnlockThisDeviceOnly,
                label: "Keepsake cloud account (\(user))", comment: learnt,
                generic: Data(user.utf8)),
            data: password.unsafeData())
    }
}

/// `~/.netrc`: `machine HOST login USER password PASSWORD` entries (and `default`), as curl and
/// ftp read them. Refused when other users may read it, or when it is larger than 64 KiB.
package enum Netrc {
    package static func credentials(for host: String, in home: URL) throws -> (
        user: String, password: String
    )? {
        let file = home.appendingPathComponent(".netrc")
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else {
            return nil
        }
        if let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0 {
            throw OptionError("~/.netrc may be read by other users: chmod 600 it")
        }
        guard let size = attributes[.size] as? Int, size <= 64 * 1024,
            let text = try? String(contentsOf: file, encoding: .utf8)
        else { throw OptionError("~/.netrc is larger than 64 KiB or not UTF-8") }
        return parse(text, host: host)
    }

    /// The first `machine HOST` entry's login and password, else the `default` entry's.
    package static func parse(_ text: String, host: String) -> (user: String, password: String)? {
        var tokens = text.split(whereSeparator: \.isWhitespace).map(String.init)[...]
        var entries: [(machine: String?, user: String?, password: String?)] = []
        while let token = tokens.popFirst() {
            switch token {
            case "machine": entries.append((tokens.popFirst() ?? "", nil, nil))
            case "default": entries.append((nil, nil, nil))
            case "login", "password":
                let value = tokens.popFirst()
                guard !entries.isEmpty else { continue }
                if token == "login" {
                    entries[entries.count - 1].user = value
                } else {
                    entries[entries.count - 1].password = value
                }
            case "account", "macdef": _ = tokens.popFirst()
            default: continue
            }
        }
        let chosen =
            entries.first { $0.machine == host } ?? entries.first { $0.machine == nil }
        guard let chosen, let user = chosen.user, let password = chosen.password else {
            return nil
        }
        return (user, password)
    }
}
