import Foundation
import Testing

@testable import LocalAuthentication

/// `LAContext` as Apple code calls it: the policies a Linux machine can and cannot evaluate
/// (and the `LAError` each answers, in Apple's domain and numbers), the credentials a context
/// carries to the Keychain, and a context's identity.
@Suite("LocalAuthentication: LAContext's policies, errors and credentials")
struct LAContextTests {
    static let biometric: [LAPolicy] = [
        .deviceOwnerAuthenticationWithBiometrics, .deviceOwnerAuthenticationWithWatch,
        .deviceOwnerAuthenticationWithBiometricsOrWatch,
    ]

    @Test("biometric and watch policies: canEvaluatePolicy is false with biometryNotAvailable")
    func biometricPolicies() {
        let context = LAContext()
        #expect(context.biometryType == .none)
        for policy in Self.biometric {
            var error: NSError?
            #expect(!context.canEvaluatePolicy(policy, error: &error))
            #expect(error?.domain == LAError.errorDomain)
            #expect(error?.domain == "com.apple.LocalAuthentication")
            #expect(error?.code == LAError.Code.biometryNotAvailable.rawValue)
            #expect(error?.code == -6, "Apple's number for biometryNotAvailable")
        }
    }

    @Test("deviceOwnerAuthentication: no system dialog on Linux, answered notInteractive")
    func ownerPolicy() async {
        let context = LAContext()
        var error: NSError?
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: &error))
        #expect(error?.code == LAError.Code.notInteractive.rawValue)
        #expect(error?.code == -1004, "Apple's number for notInteractive")
        #expect(error?.localizedDescription.contains("dialog") == true)
        await #expect(throws: LAError(.notInteractive, "no system authentication dialog on Linux"))
        {
            try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
        }
        // canEvaluatePolicy with no error pointer answers the same, and writes nothing.
        #expect(!context.canEvaluatePolicy(.deviceOwnerAuthentication, error: nil))
    }

    @Test("evaluatePolicy's reply form answers on another thread, with the same LAError")
    func replyForm() async {
        let context = LAContext()
        let (succeeded, code) = await withCheckedContinuation { continuation in
            context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "x") {
                success, error in
                continuation.resume(returning: (success, (error as? LAError)?.code))
            }
        }
        #expect(!succeeded)
        #expect(code == .biometryNotAvailable)
    }

    @Test("credentials: set, read by the Keychain, cleared by nil and by invalidate")
    func credentials() {
        let context = LAContext()
        #expect(!context.isCredentialSet(.applicationPassword))
        #expect(context.setCredential(Data("app password".utf8), type: .applicationPassword))
        #expect(context.isCredentialSet(.applicationPassword))
        #expect(
            context.applicationPassword?.withUnsafeBytes { Data($0) } == Data("app password".utf8))
        context.setCredential(nil, type: .applicationPassword)
        #expect(!context.isCredentialSet(.applicationPassword))

        context.setDevicePasscode("482916")
        #expect(context.devicePasscode?.withUnsafeBytes { Data($0) } == Data("482916".utf8))
        context.setCredential(Data("again".utf8), type: .applicationPassword)
        context.invalidate()
        #expect(context.devicePasscode == nil)
        #expect(!context.isCredentialSet(.applicationPassword))
    }

    @Test("a context is its own identity: equal and hashed only to itself")
    func identity() {
        let one = LAContext()
        let two = LAContext()
        #expect(one == one && one != two)
        #expect(Set([AnyHashable(one), AnyHashable(one), AnyHashable(two)]).count == 2)
    }

    @Test("LAError reads as Apple's: its code, message and localizedDescription")
    func errors() {
        let error = LAError(.authenticationFailed, "wrong passcode")
        #expect(error.code == LAError.authenticationFailed)
        #expect(error.description == "LAError -1: wrong passcode")
        #expect((error as any Error).localizedDescription == error.description)
        #expect(LAError.Code.userCancel.rawValue == -2)
        #expect(LAError.Code.passcodeNotSet.rawValue == -5)
    }
}
