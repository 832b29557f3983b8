import AppWiring
import CloudAccount
import Device
import Foundation
import Keychain

/// `keepsake cloud login | logout | status --cloud URL`: the WebDAV account's credentials, kept in
/// a Keychain item of Keepsake's own (`CloudCredentials`); standard input gives the user name and
/// the password on their own lines — never the command line.
enum CloudCommand {
    static func run(_ verb: String?, _ context: Context) throws {
        try context.arguments.allowOnly([])
        guard let url = context.webDAVURL else {
            throw CommandError.usage("keepsake cloud \(verb ?? "") needs --cloud https://…")
        }
        let keychain = try CloudCredentials.keychain(device: context.device)
        switch verb {
        case "login":
            let (lines, _) = try SecretInput.leadingLines(2)
            guard lines.count == 2, lines[0].count > 0,
                let user = String(data: lines[0].unsafeData(), encoding: .utf8),
                String(data: lines[1].unsafeData(), encoding: .utf8) != nil
            else {
                throw CommandError.param(
                    "standard input: the user name, then the password, each on its own line (UTF-8)"
                )
            }
            // Checked first, so a typo is refused now rather than kept for the next sync.
            let cloud = try WebDAVCloud(
                url: url, username: user,
                password: String(decoding: lines[1].unsafeData(), as: UTF8.self),
                caFile: context.cloudCA)
            _ = try cloud.list()
            // What the server honours, tried now: a server two devices cannot share safely is
            // refused here, with what would fix it, and nothing is kept.
            let capabilities = try cloud.probe()
            if let refusal = capabilities.refusal {
                throw CloudError(refusal, isTemporary: false)
            }
            try CloudCredentials.store(
                user: user, password: lines[1], capabilities: capabilities, for: url,
                keychain: keychain)
            Output.json(["stored": true, "reachable": true, "server": capabilities.json])
        case "logout":
            try? keychain.delete(matching: CloudCredentials.query(url))
            Output.json(["stored": false])
        case "status":
            let found = try CloudCredentials.find(for: url, device: context.device)
            var object: [String: Any] = ["credentials": found?.source ?? "none"]
            let cloud = try WebDAVCloud(
                url: url, username: found?.user, password: found?.password,
                caFile: context.cloudCA, attempts: 1)
            if let capabilities = found?.capabilities { object["server"] = capabilities.json }
            do {
                object["objects"] = try cloud.list().count
                object["reachable"] = true
            } catch {
                object["reachable"] = false
                object["error"] = "\(error)"
            }
            Output.json(object)
        default:
            throw CommandError.usage("keepsake cloud login|logout|status --cloud URL")
        }
    }
}
