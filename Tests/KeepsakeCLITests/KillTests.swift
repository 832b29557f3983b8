import Foundation
import KeepsakeTestSupport
import Testing

@Suite("Faults: the process SIGKILLed at random points of a write")
struct KillTests {
    @Test("100 killed writes: every later read returns the old or the new value in full, never torn")
    func killedWrites() throws {
        let service = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.kill", "--device-dir", service.root.appendingPathComponent("device").path]
        var environment = service.environment
        environment["KEEPSAKE_ARGON2_COST"] = "minimum"
        func value(_ n: Int) -> Data { Data(repeating: UInt8(65 + n % 26), count: 3000) + Data("#\(n)".utf8) }
        let keychain = ["--service", "kill", "--account", "a"] + app
        #expect(try keepsake(["keychain", "add"] + keychain, input: value(0), service: service).status == 0)
        #expect(try keepsake(["blockstore", "store", "--key", "k"] + app, input: value(0), service: service).status == 0)
        var keychainValue = 0
        var blockStoreValue = 0
        var killedMidway = 0
        for trial in 1...100 {
            let useKeychain = trial % 2 == 0
            let process = Process()
            process.executableURL = keepsakeExecutable
            process.arguments = useKeychain ? ["keychain", "update"] + keychain : ["blockstore", "store", "--key", "k"] + app
            process.environment = environment
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            input.fileHandleForWriting.write(value(trial))
            try input.fileHandleForWriting.close()
            usleep(UInt32.random(in: 0...40_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal { killedMidway += 1 }
            if useKeychain {
                let read = try keepsake(["keychain", "get"] + keychain, service: service).stdout
                #expect(read == value(keychainValue) || read == value(trial), "trial \(trial): torn or wrong value")
                if read == value(trial) { keychainValue = trial }
                #expect(try service.connection().search(["service": "kill"]).unlocked.count == 1)
            } else {
                let read = try keepsake(["blockstore", "retrieve", "--key", "k"] + app, service: service).stdout
                let object = try #require(try JSONSerialization.jsonObject(with: read) as? [String: String])
                let bytes = object["k"].flatMap { Data(base64Encoded: $0) }
                #expect(bytes == value(blockStoreValue) || bytes == value(trial), "trial \(trial): torn or wrong value")
                if bytes == value(trial) { blockStoreValue = trial }
            }
        }
        print("kill: 100 trials, \(killedMidway) killed before finishing")
        #expect(killedMidway > 10)
    }
}
