import Device
import Foundation
import KeepsakeTestSupport
import Keychain
import SecretService
import Testing

/// KeePassXC as its users run it, not as the harness does: its Secret Service integration asks a
/// person before some answers unless told not to. Keepsake must ask nobody, and answer at once.
@Suite(
    "KeePassXC with its own confirmations on",
    .enabled(if: PrivateSecretService.defaultProvider == .gnomeKeyring))
struct KeePassXCConfirmationTests {
    /// Runs `body`, which must fail with `status`, and returns how long it took.
    private func refused(
        _ status: KeychainStatus, _ what: String, _ body: () throws -> Void
    ) -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try body()
            Issue.record("\(what): succeeded")
        } catch let error as KeychainError {
            #expect(error.status == status, "\(what): \(error)")
        } catch {
            Issue.record("\(what): \(error)")
        }
        return clock.now - start
    }

    /// Runs each call, which must answer `errSecInteractionNotAllowed`: a call that reached a
    /// KeePassXC dialog would wait in it for the whole 5 s bound and answer `errSecNotAvailable`
    /// (timed out) instead, so the status alone tells; how long they took is printed (a few
    /// milliseconds here), and allowed up to half the bound scaled by the machine's pace.
    private func expectRefusedAtOnce(_ situation: String, _ calls: [(String, () throws -> Void)]) {
        let slowest = calls.map { refused(.interactionNotAllowed, $0.0, $0.1) }.max() ?? .zero
        #expect(slowest < Pace.scaled(.milliseconds(2_500)), "\(slowest)")
        print("KeePassXC \(situation): the slowest refusal took \(slowest) (bound 5 s)")
    }

    @Test(
        "as the README asks (its defaults, access confirmation off): add, read, update and delete work with deletes confirmed and an unlock dialog before searches; a locked database answers errSecInteractionNotAllowed at once, where the Service's search waits in that dialog for a person"
    )
    func accessUnconfirmed() throws {
        let service = try PrivateSecretService.start(
            provider: .keepassxc, keepassxcConfirmations: .accessUnconfirmed)
        defer { service.stop() }
        let app = try ThrowawayApp.make()
        let device = service.device(directory: Throwaway.directory("kpx-defaults"), tuning: .fast)
        let keychain = Keychain(app: app, device: device)
        let alice = GenericPasswordQuery(service: "defaults", account: "alice")
        try keychain.add(
            GenericPasswordAttributes(service: "defaults", account: "alice"),
            data: Data("one".utf8))
        #expect(try keychain.data(matching: alice) == Data("one".utf8))
        try keychain.update(matching: alice, with: GenericPasswordChanges(data: Data("two".utf8)))
        #expect(try keychain.data(matching: alice) == Data("two".utf8))
        try keychain.delete(matching: alice)
        _ = refused(.itemNotFound, "read after delete") { _ = try keychain.data(matching: alice) }
        let bob = GenericPasswordQuery(service: "defaults", account: "bob")
        try keychain.add(
            GenericPasswordAttributes(service: "defaults", account: "bob"), data: Data("b".utf8))

        try service.lock()
        let other = Keychain(app: app, device: device)  // no path cached: it must search
        expectRefusedAtOnce(
            "with its database locked",
            [
                ("read", { _ = try other.data(matching: bob) }),
                (
                    "list",
                    {
                        _ = try other.items(
                            matching: GenericPasswordQuery(service: "defaults"), limit: .all)
                    }
                ),
                (
                    "add",
                    {
                        try other.add(
                            GenericPasswordAttributes(service: "defaults", account: "carol"),
                            data: Data("c".utf8))
                    }
                ),
                ("delete", { try other.delete(matching: bob) }),
            ])

        // The trap avoided: the Service's own SearchItems (libsecret's) gets no answer while the
        // database is locked, KeePassXC waiting in its unlock dialog.
        let searched = try Spawn.run(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--timeout", "2", "--dest", "org.freedesktop.secrets",
                "--object-path", "/org/freedesktop/secrets", "--method",
                "org.freedesktop.Secret.Service.SearchItems", "{'service': 'defaults'}",
            ], environment: service.environment)
        #expect(searched != 0, "the Service's search answered")

        // Unlocked again (KeePassXC started on its database, as at a login), everything is there.
        try service.unlock()
        #expect(try keychain.data(matching: bob) == Data("b".utf8))
    }

    @Test(
        "as installed (a person confirms each client's first access to each item; KeePassXC counts each D-Bus connection as a client): every call answers errSecInteractionNotAllowed at once and opens no dialog, and KeePassXC keeps answering"
    )
    func asInstalled() throws {
        let service = try PrivateSecretService.start(
            provider: .keepassxc, keepassxcConfirmations: .asInstalled)
        defer { service.stop() }
        let app = try ThrowawayApp.make()
        let keychain = Keychain(
            app: app,
            device: service.device(
                directory: Throwaway.directory("kpx-as-installed"), tuning: .fast))
        expectRefusedAtOnce(
            "as installed",
            [
                (
                    "add",
                    {
                        try keychain.add(
                            GenericPasswordAttributes(service: "installed", account: "a"),
                            data: Data("a".utf8))
                    }
                ),
                (
                    "read",
                    { _ = try keychain.data(matching: GenericPasswordQuery(service: "installed")) }
                ),
                (
                    "a second add",
                    {
                        try keychain.add(
                            GenericPasswordAttributes(service: "installed", account: "b"),
                            data: Data("b".utf8))
                    }
                ),
            ])
        // No dialog holds KeePassXC: it answers another client at once.
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try service.connection(timeout: .seconds(2)).isLocked(.default) == false)
        #expect(
            clock.now - start < Pace.allowance(bound: .seconds(2), slack: .milliseconds(500)))
    }
}
