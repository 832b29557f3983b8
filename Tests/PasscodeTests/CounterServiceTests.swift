import Escrow
import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import Testing

@testable import Device

@Suite(
    "Passcode guesses counted by a guess counter service (keepsake-escrow as a user of its own, on its UNIX socket): no process of the user reaches around it, no impostor learns a thing",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"),
    .enabled(
        if: PrivateEscrow.canRunCounter, "the counter runs as a user of its own: needs root"))
struct CounterServiceTests {
    @Test(
        "the right passcode unlocks; status says service and where it counts; the record holds no verifier, no TPM slot, nothing to test a guess against, and pins the counter's user and key; a passcode change moves the slot and removes the old one"
    )
    func unlock() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "482916", currentPasscode: nil)
        let record = try storedRecord(device)
        let slot = try #require(record.passcode.counterSlot)
        let pin = try #require(record.passcode.counterPin)
        #expect(record.passcode.verifier == nil && record.passcode.tpm == nil)
        #expect(pin.peer == PrivateEscrow.counterUser)
        #expect(pin.publicKey == (try counter.configuration.client().status(of: slot).publicKey))
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000000") } == .authFailed)
        #expect(try device.status().failedAttempts == 1)
        let report = try device.unlockReporting(passcode: "482916")
        #expect(report.wrongPasscodes?.count == 1 && report.wrongPasscodes?.last != nil)
        let status = try device.status()
        #expect(status.guessLimit == "service" && status.countedIn == "software TPM (IBM SW)")
        // A wrong passcode is spent: the right one takes back its own claim, not the wrong one.
        #expect(status.failedAttempts == 1 && status.state == .unlocked)
        // What the record holds opens nothing without the counter: the software path's KEK from
        // the right passcode and the device secret does not unwrap the class keys.
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "482916", salt: try #require(record.passcode.salt),
            cost: try #require(record.passcode.cost))
        let softwareKEK = PasscodeKeys.softwareKEK(
            passcodeKey: passcodeKey, deviceSecret: SecureBytes(copying: record.deviceSecret))
        #expect(throws: (any Error).self) {
            try PasscodeKeys.unwrap(record.wrappedKeys, kek: softwareKEK)
        }
        // A passcode change: a new slot, the old one removed at the counter.
        try device.setLockScreen(.pin, passcode: "771133", currentPasscode: "482916")
        let moved = try #require(try storedRecord(device).passcode.counterSlot)
        #expect(moved != slot)
        #expect(throws: EscrowError.self) { try counter.configuration.client().status(of: slot) }
        try device.reboot()
        #expect(code { try device.unlock(passcode: "482916") } == .authFailed)
        try device.unlock(passcode: "771133")
        // Removing the passcode removes the slot too.
        try device.setLockScreen(.none, passcode: nil, currentPasscode: "771133")
        #expect(try storedRecord(device).passcode.counterSlot == nil)
        #expect(throws: EscrowError.self) { try counter.configuration.client().status(of: moved) }
    }

    @Test(
        "wrong passcodes are spent, not refunded: 9 wrong, the right one unlocks and the owner is told 9; the count stays 9 and the next wrong one disables the device, even for the right one; resetting the record's count changes nothing; wipe recovers"
    )
    func spentNotRefunded() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        for guess in 0..<9 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("00000\(guess)".utf8)))
                }
                    == .authFailed)
        }
        let report = try device.unlockReporting(passcode: "135790")
        #expect(report.wrongPasscodes?.count == 9)
        #expect(
            report.wrongPasscodes?.notice.hasPrefix(
                "9 wrong passcodes since your last unlock, the last at 20") == true)
        #expect(try device.status().failedAttempts == 9)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "111111") } == .disabled)
        try resetStoredFailures(device)
        #expect(code { try device.unlock(passcode: "135790") } == .disabled)
        #expect(try device.state() == .beforeFirstUnlock)
        try device.wipe()
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: "135790")
        print(
            "counter service: 9 wrong passcodes stayed spent across the owner's unlock (told 9); the 10th disabled the device; a reset record count gained nothing; wipe recovers"
        )
    }

    @Test(
        "another process of the user, holding everything the user holds (the device record, the counter's address), gets at most 10 passcode checks in all, however the owner's unlocks fall between them, and the owner is told each time: claims that skip Keepsake are counted and never refunded, the count is not told to it, a removal without the slot's secret and a rewritten salt are refused"
    )
    func attackerOfTheSameUser() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "246810", currentPasscode: nil)
        try device.reboot()
        let record = try storedRecord(device)
        let slot = try #require(record.passcode.counterSlot)
        let client = counter.configuration.client()
        // The record's salt rewritten: the pin's MAC (keyed by the device secret) no longer
        // checks, so the unlock stops before anything reaches the counter, and nothing is spent.
        let loaded = try device.records.load()
        var tampered = loaded.record
        tampered.passcode.salt = Data(repeating: 9, count: KeyDerivation.saltLength)
        let tamperedPath = try device.records.store(tampered, replacing: loaded.path)
        #expect(code { try device.unlock(passcode: "246810") } == .corrupt)
        try device.records.store(loaded.record, replacing: tamperedPath)
        try device.unlock(passcode: "246810")
        try device.reboot()
        // Removing the slot takes its secret: a key derived from anything in the record fails.
        for seed in [record.deviceSecret, slot, Data(repeating: 0, count: 32)] {
            #expect(throws: EscrowError.self) {
                try client.remove(slot, secret: SecureBytes(copying: seed))
            }
        }
        // The count is told to the slot's device only: not to whoever asks, not to another key.
        let status = try client.status(of: slot)
        #expect(status.count == nil)
        #expect(throws: EscrowError.self) {
            try client.count(
                of: slot, reader: Signature.keyPair(seed: SecureBytes(randomCount: 32)))
        }
        // Guesses straight at the counter, with the real salt, cost and key, skipping Keepsake,
        // in three rounds with the owner's right unlock between them: each counted and none
        // refunded; the owner is told at each unlock; the 10th destroys the slot.
        var answers: [EscrowError.Code] = []
        var told: [Int] = []
        var guess = 0
        for round in [5, 4, 3] {
            for _ in 0..<round {
                let key = try PasscodeKeys.passcodeKey(
                    SecureBytes(copying: Data("99999\(guess)".utf8)), salt: status.salt,
                    cost: status.cost)
                guess += 1
                do throws(EscrowError) {
                    _ = try client.claim(slot, passcodeKey: key, publicKey: status.publicKey)
                } catch { answers.append(error.code) }
            }
            if let report = try? device.unlockReporting(passcode: "246810") {
                told.append(report.wrongPasscodes?.count ?? 0)
                try device.reboot()
            }
        }
        #expect(told == [5, 4])
        #expect(
            answers == Array(repeating: .authFailed, count: 9)
                + Array(repeating: .destroyed, count: 3))
        #expect(code { try device.unlock(passcode: "246810") } == .disabled)
        print(
            "counter service: an outside process got 9 checks across two of the owner's unlocks (told 5, then 4), the 10th destroyed the slot"
        )
    }

    @Test(
        "an impostor at the counter's address — another user answering on the socket while the service is down, or a socket in a directory others can write to — gets nothing: the device checks who answers (SO_PEERCRED) and the path before it sends a byte, and the unlock fails saying so"
    )
    func impostorOnTheSocket() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "305070", currentPasscode: nil)
        try device.reboot()
        let socket = try #require(counter.configuration.socket)
        // Another user cannot take the address: the socket's directory is the service's.
        counter.stop()
        let squatter = try Spawn.capture(
            "/usr/bin/setpriv",
            [
                "--reuid=64124", "--regid=64124", "--clear-groups", "/usr/bin/python3", "-c",
                "import socket; s = socket.socket(socket.AF_UNIX); s.bind('\(socket).x')",
            ],
            environment: [:])
        #expect(squatter.status != 0)
        // Whoever answers there anyway (here a listener of another uid than the registered one)
        // is refused before a byte is sent, and the failure says so.
        let impostor = try Impostor(at: socket)
        let failed = code { try device.unlock(passcode: "305070") }
        #expect(failed == .notAvailable)
        // The connection reached it (accepted once the device's connect was queued: waited for,
        // with a bound for a hang) and brought nothing.
        for _ in 0..<500 where impostor.finished == 0 { usleep(10_000) }
        #expect(impostor.connections >= 1)
        #expect(impostor.bytesReceived == 0)
        do {
            try device.unlock(passcode: "305070")
        } catch {
            #expect(error.message.contains("not the service this device registered with"))
            #expect(error.message.contains("not user \(PrivateEscrow.counterUser)"))
        }
        impostor.stop()
        // A directory that others may write to: refused the same way, the real service or not.
        let restarted = try PrivateEscrow(
            stateDirectory: counter.stateDirectory, tpm: counter.tpm,
            socket: URL(fileURLWithPath: socket),
            user: PrivateEscrow.counterUser)
        let directory = URL(fileURLWithPath: socket).deletingLastPathComponent().path
        chmod(directory, 0o777)
        let loose = code { try device.unlock(passcode: "305070") }
        #expect(loose == .notAvailable)
        chmod(directory, 0o755)
        try device.unlock(passcode: "305070")
        #expect(try device.status().failedAttempts == 0)
        restarted.stop()
        print(
            "counter service: an impostor on the socket got 0 bytes; a loose directory was refused")
    }
}

extension CounterServiceTests {
    @Test(
        "the shipped service's own delays: after 5 wrong passcodes the counter takes the next claim only a minute later — refused, not counted, and the device says when"
    )
    func serviceDelays() throws {
        let counter = try PrivateEscrow.counter(files: true, delays: true)
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "918273", currentPasscode: nil)
        try device.reboot()
        for guess in 0..<5 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("00000\(guess)".utf8)))
                }
                    == .authFailed)
        }
        do {
            try device.unlock(passcode: "918273")
            Issue.record("the 6th claim was taken at once")
        } catch {
            #expect(error.code == .authFailed)
            #expect(
                error.message.contains("the guess counter takes the next one after 20"),
                "\(error.message)")
        }
        #expect(try device.status().failedAttempts == 5)
    }
}

extension CounterServiceTests {
    @Test(
        "a passcode change cut short after the new record is stored (the old slot not yet removed at the counter) leaves the old slot listed as retired: the next unlock removes it before its claim, so the old passcode stops answering"
    )
    func changeCutShort() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "111222", currentPasscode: nil)
        let old = try #require(try storedRecord(device).passcode.counterSlot)
        // The change as setLockScreen makes it, stopped after the store.
        try device.guessLimit.exclusively { () throws(DeviceError) in
            let proof = try device.prove("111222")
            let keys = try PasscodeKeys.unwrap(proof.record.wrappedKeys, kek: proof.kek)
            var updated = proof.record
            try device.seal(keys, passcode: "333444", into: &updated)
            _ = try device.records.store(updated, replacing: proof.path)
        }
        #expect(try storedRecord(device).passcode.retiredCounterSlots == [old])
        let client = counter.configuration.client()
        #expect(try client.status(of: old).limit == 10)  // still there, still answering
        try device.reboot()
        try device.unlock(passcode: "333444")
        #expect(throws: EscrowError.self) { try client.status(of: old) }
        #expect(try storedRecord(device).passcode.retiredCounterSlots == nil)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "111222") } == .authFailed)
    }
}

extension CounterServiceTests {
    @Test(
        "a counter slot registered before pins (a record without one) unlocks once as the service answers and is registered again, pinned, at that unlock; the old slot is removed"
    )
    func slotFromBeforePins() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "424242", currentPasscode: nil)
        let loaded = try device.records.load()
        var earlier = loaded.record
        let slot = try #require(earlier.passcode.counterSlot)
        earlier.passcode.counterPin = nil
        try device.records.store(earlier, replacing: loaded.path)
        try device.reboot()
        try device.unlock(passcode: "424242")
        let record = try storedRecord(device)
        #expect(record.passcode.counterPin?.peer == PrivateEscrow.counterUser)
        #expect(record.passcode.counterSlot != slot)
        #expect(throws: EscrowError.self) { try counter.configuration.client().status(of: slot) }
        try device.reboot()
        try device.unlock(passcode: "424242")
    }
}

/// A listener on a UNIX socket of this process's user (not the counter's): it counts what
/// arrives and answers nothing.
private final class Impostor: @unchecked Sendable {
    // @unchecked Sendable: the counts are guarded by `lock`; `fd` is written once in init.
    private let fd: Int32
    private let lock = NSLock()
    private var received = 0
    private var accepted = 0
    private var served = 0
    private var running = true

    init(at path: String) throws {
        unlink(path)
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else { throw HarnessError("impostor: no socket") }
        let thread = Thread { [self] in
            while lock.withLock({ running }) {
                let connection = accept(fd, nil, nil)
                guard connection >= 0 else { continue }
                lock.withLock { accepted += 1 }
                var timeout = timeval(tv_sec: 1, tv_usec: 0)
                setsockopt(
                    connection, SOL_SOCKET, SO_RCVTIMEO, &timeout,
                    socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let got = recv(connection, &buffer, buffer.count, 0)
                    guard got > 0 else { break }
                    lock.withLock { received += got }
                }
                close(connection)
                lock.withLock { served += 1 }
            }
        }
        thread.start()
    }

    var bytesReceived: Int { lock.withLock { received } }
    var connections: Int { lock.withLock { accepted } }
    /// Connections read to their end (or the 1 s receive bound) and closed.
    var finished: Int { lock.withLock { served } }

    func stop() {
        lock.withLock { running = false }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
