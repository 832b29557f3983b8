import Foundation
import KeepsakeTestSupport
import Testing

@Suite("keepsake keychain: --access-control, credentials on standard input, internet passwords")
struct KeychainAccessCLITests {
    @Test(
        "a passcode item: added without the pin, read only with --with-passcode and the pin on standard input; the right one reports the wrong passcodes before it on standard error, as a lock-screen change does"
    )
    func passcodeItem() throws {
        let service = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.acl"]
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"], input: Data("8642\n".utf8),
                service: service
            ).status == 0)
        let item = ["--service", "vault", "--account", "a"] + app
        #expect(
            try keepsake(
                ["keychain", "add", "--access-control", "passcode"] + item,
                input: Data("multi\nline secret".utf8), service: service
            ).status == 0)
        let bare = try keepsake(["keychain", "get"] + item, service: service)
        #expect(bare.status != 0 && bare.stderr.contains("errSecInteractionNotAllowed"))
        let wrong = try keepsake(
            ["keychain", "get", "--with-passcode"] + item, input: Data("1111\n".utf8),
            service: service)
        #expect(wrong.status != 0 && wrong.stderr.contains("errSecAuthFailed"))
        #expect(!wrong.stderr.contains("1111"))
        let right = try keepsake(
            ["keychain", "get", "--with-passcode"] + item, input: Data("8642\n".utf8),
            service: service)
        #expect(right.status == 0 && right.text == "multi\nline secret")
        // The right passcode reports the wrong one before it on standard error, as an unlock.
        #expect(right.stderr.contains("keepsake: 1 wrong passcode since your last unlock"))
        // A lock-screen change proving the passcode reports too.
        #expect(
            try keepsake(["lockscreen", "unlock"], input: Data("0000\n".utf8), service: service)
                .status != 0)
        let changed = try keepsake(
            ["lockscreen", "set", "--kind", "pin"], input: Data("8642\n8642\n".utf8),
            service: service)
        #expect(changed.status == 0, "\(changed.stderr)")
        #expect(changed.stderr.contains("keepsake: 1 wrong passcode since your last unlock"))
        let list = try keepsake(["keychain", "list", "--service", "vault"] + app, service: service)
        #expect(list.text.contains("\"accessControl\""))
        #expect(
            try keepsake(
                ["keychain", "add", "--access-control", "fingerprint"] + item, service: service
            ).stderr.contains("--access-control takes"))
    }

    @Test("an app-password item: the password is the first line, the secret the rest")
    func appPasswordItem() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.acl\(UUID().uuidString.prefix(6).lowercased())"]
        let item = ["--service", "vault", "--account", "p"] + app
        #expect(
            try keepsake(
                ["keychain", "add", "--access-control", "app-password", "--with-app-password"]
                    + item, input: Data("correct horse\ns3cret".utf8), service: service
            ).status == 0)
        #expect(
            try keepsake(
                ["keychain", "get", "--with-app-password"] + item,
                input: Data("correct horse\n".utf8),
                service: service
            ).text == "s3cret")
        #expect(
            try keepsake(
                ["keychain", "get", "--with-app-password"] + item, input: Data("wrong\n".utf8),
                service: service
            ).stderr.contains("errSecAuthFailed"))
    }

    @Test("internet passwords by --server, --port, --protocol")
    func internetPassword() throws {
        let service = try PrivateSecretService.shared()
        let app = ["--app-id", "com.example.inet\(UUID().uuidString.prefix(6).lowercased())"]
        let site = [
            "--server", "example.com", "--port", "443", "--protocol", "htps", "--account", "me",
        ]
        #expect(
            try keepsake(
                ["keychain", "add"] + site + app, input: Data("pw".utf8), service: service
            )
            .status == 0)
        #expect(
            try keepsake(
                ["keychain", "get", "--server", "example.com", "--account", "me"] + app,
                service: service
            ).text == "pw")
        let list = try keepsake(
            ["keychain", "list", "--server", "example.com"] + app, service: service)
        let items = try #require(
            try JSONSerialization.jsonObject(with: list.stdout) as? [[String: Any]])
        #expect(items.first?["port"] as? Int == 443 && items.first?["service"] == nil)
        #expect(
            try keepsake(["keychain", "get", "--account", "me"] + app, service: service).status
                == 2)
    }
}
