import CRogueSecretService
import Foundation
import KeepsakeTestSupport
import SecretService
import Testing

/// Whoever owns `org.freedesktop.secrets` on the user's bus answers Keepsake's calls: a broken
/// provider, or a program that took the name first. Its replies are outside input.
@Suite(
    "Secret Service replies are checked before they are read",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct ImpostorProviderTests {
    @Test(
        "replies of the wrong type (SearchItems, GetSecrets, Lock) are errors that name the method and the types, never read; a well-typed answer still is"
    )
    func wrongTypes() throws {
        let service = try PrivateSecretService.start(provider: .gnomeKeyring)
        defer { service.stop() }
        service.kill()
        var failure: UnsafeMutablePointer<GError>?
        guard let impostor = keepsake_rogue_start(service.busAddress, &failure) else {
            let message = failure.map { String(cString: $0.pointee.message) } ?? "?"
            Issue.record("the impostor did not start: \(message)")
            return
        }
        defer { keepsake_rogue_stop(impostor) }
        let connection = service.connection(timeout: .seconds(2))
        let calls: [(method: String, type: String, call: () throws -> Void)] = [
            ("SearchItems", "(ao)", { _ = try connection.search(["service": "s"]) }),
            (
                "GetSecrets", "(a{o(oayays)})",
                { _ = try connection.secrets(at: [ItemPath("/org/freedesktop/secrets/item/1")]) }
            ),
            ("Lock", "(aoo)", { try connection.lock(.default) }),
        ]
        for (method, type, call) in calls {
            do {
                try call()
                Issue.record("\(method): a reply of the wrong type was taken")
            } catch let error as SecretServiceError {
                // The reads check their replies' types themselves (reader.c); GDBus checks
                // libsecret's (Lock) against its interface description.
                #expect(error.message.contains(method), "\(error)")
                #expect(error.message.contains(type), "\(error)")
                #expect(error.code == .failed, "\(error)")
            }
        }
        // The session opened (its reply had the right type), and a well-typed answer is read.
        #expect(try connection.isLocked(.default) == false)
        #expect(keepsake_rogue_calls(impostor) >= 5)
    }

    @Test(
        "signals flooded at Keepsake's connections are dropped unread: 80 MB in four bursts between reads leave every read answering; one burst past the reading connection's 64 MiB queue ends a read at its bound, and the next read answers on a new connection"
    )
    func signalFlood() throws {
        let service = try PrivateSecretService.start()
        defer { service.stop() }
        // 2 s on a quiet machine: the daemon routes 20 MB of signals to each connection between
        // reads, which a busy machine does slower.
        let bound = Pace.scaled(.seconds(2))
        let connection = service.connection(timeout: bound)
        #expect(try connection.search(["k": "none"]).unlocked.isEmpty)
        // A write opens the second connection (libsecret's, opened at the first write).
        _ = try connection.createItem(
            label: "flood", attributes: ["k": "flood"], secret: Data("x".utf8))
        func flood(_ count: UInt32) throws -> UInt32 {
            var failure: UnsafeMutablePointer<GError>?
            let names = keepsake_rogue_flood(
                service.busAddress, UInt32(getpid()), count, 4096, &failure)
            if let failure {
                let message = String(cString: failure.pointee.message)
                g_error_free(failure)
                throw HarnessError("flood: \(message)")
            }
            return names
        }
        // Four bursts of 20 MB: kept, they would fill the reading connection's queue (64 MiB)
        // and stall the fourth read; dropped after each read, every read answers at once.
        let clock = ContinuousClock()
        for _ in 0..<4 {
            #expect(try flood(5_000) >= 2)  // the GDBus connection (writes) and libdbus (reads)
            let start = clock.now
            #expect(try connection.search(["k": "none"]).unlocked.isEmpty)
            #expect(clock.now - start < bound)
        }
        // One burst past the queue's cap: the read waits no longer than its bound, the queue
        // goes with its connection, and the next read answers on a new one.
        _ = try flood(25_000)
        let start = clock.now
        do { _ = try connection.search(["k": "none"]) } catch {
            #expect(error.code == .timedOut, "\(error)")
        }
        let took = clock.now - start
        let allowed = Pace.allowance(bound: bound, slack: .milliseconds(500))
        #expect(took < allowed, "\(took)")
        print(
            "flood: a read behind 100 MB of signals ended after \(took) (its call's bound \(bound); allowed here \(allowed))"
        )
        #expect(try connection.search(["k": "none"]).unlocked.isEmpty)
    }
}
