import Foundation
import KeepsakeTestSupport
import Testing

@Suite("Faults: the process SIGKILLed at random points of a write")
struct KillTests {
    @Test(
        "100 killed writes: every later read returns the old or the new value in full, never torn")
    func killedWrites() throws {
        let service = try PrivateSecretService.start()
        let app = [
            "--app-id", "com.example.kill", "--device-dir",
            service.root.appendingPathComponent("device").path,
        ]
        var environment = service.environment
        environment["KEEPSAKE_ARGON2_COST"] = "minimum"
        func value(_ n: Int) -> Data {
            Data(repeating: UInt8(65 + n % 26), count: 3000) + Data("#\(n)".utf8)
        }
        let keychain = ["--service", "kill", "--account", "a"] + app
        #expect(
            try keepsake(["keychain", "add"] + keychain, input: value(0), service: service).status
                == 0)
        #expect(
            try keepsake(
                ["blockstore", "store", "--key", "k"] + app, input: value(0), service: service
            ).status == 0)
        var keychainValue = 0
        var blockStoreValue = 0
        var killedMidway = 0
        for trial in 1...100 {
            let useKeychain = trial % 2 == 0
            let process = Process()
            process.executableURL = keepsakeExecutable
            process.arguments =
                useKeychain
                ? ["keychain", "update"] + keychain : ["blockstore", "store", "--key", "k"] + app
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
                #expect(
                    read == value(keychainValue) || read == value(trial),
                    "trial \(trial): torn or wrong value")
                if read == value(trial) { keychainValue = trial }
                #expect(try service.connection().search(["service": "kill"]).unlocked.count == 1)
            } else {
                let read = try keepsake(
                    ["blockstore", "retrieve", "--key", "k"] + app, service: service
                ).stdout
                let object = try #require(
                    try JSONSerialization.jsonObject(with: read) as? [String: String])
                let bytes = object["k"].flatMap { Data(base64Encoded: $0) }
                #expect(
                    bytes == value(blockStoreValue) || bytes == value(trial),
                    "trial \(trial): torn or wrong value")
                if bytes == value(trial) { blockStoreValue = trial }
            }
        }
        print("kill: 100 trials, \(killedMidway) killed before finishing")
        #expect(killedMidway > 10)
    }
}

@Suite("Faults: a full disk, a Secret Service killed mid-operation")
struct DiskAndDaemonFaultTests {
    @Test(
        "a full disk (ulimit -f) fails a Block Store store with a clear error and keeps the old value"
    )
    func diskFull() throws {
        let service = try PrivateSecretService.start()
        let app = [
            "--app-id", "com.example.disk", "--device-dir",
            service.root.appendingPathComponent("device").path,
        ]
        #expect(
            try keepsake(
                ["blockstore", "store", "--key", "k"] + app, input: Data("old".utf8),
                service: service
            ).status == 0)
        // A file-size limit of 1 block: the new entry file cannot be written.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments =
            [
                "-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"", keepsakeExecutable.path,
                "blockstore", "store", "--key", "k",
            ] + app
        process.environment = service.environment
        let input = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(repeating: 0x6e, count: 3000))
        try input.fileHandleForWriting.close()
        let message = String(
            decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1)
        #expect(
            message.contains("INTERNAL_ERROR (8)") && message.contains("could not be written"),
            "\(message)")
        let read = try keepsake(["blockstore", "retrieve", "--key", "k"] + app, service: service)
            .stdout
        #expect(
            String(decoding: read, as: UTF8.self).contains(Data("old".utf8).base64EncodedString()))
        // No temporary file left behind.
        let directory = service.root.appendingPathComponent(
            "device/apps/com.example.disk/blockstore")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
                $0.hasSuffix(".tmp")
            }.isEmpty)
    }

    @Test(
        "the Secret Service killed during Keychain writes: each call returns within its bound, later reads are old or new"
    )
    func daemonKilledMidOperation() throws {
        let service = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.daemon"]
        #expect(
            try keepsake(
                ["keychain", "add", "--service", "d", "--account", "a"] + app,
                input: Data("old".utf8), service: service
            ).status == 0)
        for trial in 0..<5 {
            let writers = try (0..<4).map { index -> Process in
                let process = Process()
                process.executableURL = keepsakeExecutable
                process.arguments =
                    ["keychain", "update", "--service", "d", "--account", "a"] + app
                process.environment = service.environment
                let input = Pipe()
                process.standardInput = input
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                input.fileHandleForWriting.write(Data("new-\(trial)-\(index)".utf8))
                try input.fileHandleForWriting.close()
                return process
            }
            usleep(UInt32.random(in: 0...20_000))
            service.kill()
            let start = Date()
            for writer in writers { writer.waitUntilExit() }
            #expect(Date().timeIntervalSince(start) < 12, "a call outlived its bound")
            try service.restart()
            let read = String(
                decoding: try keepsake(
                    ["keychain", "get", "--service", "d", "--account", "a"] + app, service: service
                ).stdout, as: UTF8.self)
            #expect(read == "old" || read.hasPrefix("new-"), "torn or wrong: \(read)")
            #expect(try service.connection().search(["service": "d"]).unlocked.count == 1)
        }
    }
}
