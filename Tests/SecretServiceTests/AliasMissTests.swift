import Foundation
import Testing

@testable import SecretService

@Suite("A call gnome-keyring answered for a collection its alias does not name")
struct AliasMissTests {
    private func error(_ message: String) -> SecretServiceError {
        SecretServiceError(
            .noSuchObject, message: message, dbusName: "org.freedesktop.DBus.Error.UnknownMethod")
    }

    @Test(
        "the `default` alias resolved to a collection that is not there is made once more; an item or session that is gone, and any other error, is not"
    )
    func classified() {
        let gdbus =
            "GDBus.Error:org.freedesktop.DBus.Error.UnknownMethod: Object does not exist at path"
        #expect(
            DBusSecretService.isAliasMiss(
                error("\(gdbus) \u{201C}/org/freedesktop/secrets/collection/C_1c_f0I_acU\u{201D}")))
        #expect(
            !DBusSecretService.isAliasMiss(
                error("\(gdbus) \u{201C}/org/freedesktop/secrets/collection/login/12\u{201D}")))
        #expect(
            !DBusSecretService.isAliasMiss(
                error("\(gdbus) \u{201C}/org/freedesktop/secrets/session/s3\u{201D}")))
        #expect(
            !DBusSecretService.isAliasMiss(
                SecretServiceError(
                    .locked,
                    message: "\(gdbus) \u{201C}/org/freedesktop/secrets/collection/x\u{201D}")))
    }
}
