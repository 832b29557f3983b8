import CRogueSecretService
import Foundation
import KeepsakeTestSupport
import SecretService
import Testing

/// Whoever owns `org.freedesktop.secrets` on the user's bus answers Keepsake's calls: a broken
/// provider, or a program that took the name first. Its replies are outside input.
@Suite("Secret Service replies are checked before they are read")
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
            ("SearchItems", "(aoao)", { _ = try connection.search(["service": "s"]) }),
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
}
