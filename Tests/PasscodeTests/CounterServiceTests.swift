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
        // The wrong one was reported to the owner in this call: its try came back then.
        #expect(status.failedAttempts == 0 && status.state == .unlocked)
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
        "wrong passcodes stay spent until the owner is told: 9 wrong, the right one unlocks and reports 9, and only then do they come back; 10 wrong with no unlock between disable the device, even for the right one; resetting the record's count changes nothing; wipe recovers"
    )
    func spentUntilReported() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        func wrongs(_ count: Int) {
            for guess in 0..<count {
                #expect(
                    code {
                        try device.unlock(
                            passcode: SecureBytes(copying: Data("00000\(guess)".utf8)))
                    } == .authFailed)
            }
        }
        wrongs(9)
        #expect(try device.status().failedAttempts == 9)
        let report = try device.unlockReporting(passcode: "135790")
        #expect(report.wrongPasscodes?.count == 9)
        #expect(
            report.wrongPasscodes?.notice.hasPrefix(
                "9 wrong passcodes since your last unlock, the last at 20") == true)
        #expect(try device.status().failedAttempts == 0)
        try device.reboot()
        wrongs(9)
        #expect(code { try device.unlock(passcode: "111111") } == .disabled)
        try resetStoredFailures(device)
        #expect(code { try device.unlock(passcode: "135790") } == .disabled)
        #expect(try device.state() == .beforeFirstUnlock)
        try device.wipe()
        try device.setLockScreen(.pin, passcode: "135790", currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: "135790")
        print(
            "counter service: 9 wrong passcodes came back only with the report that told them; 10 in a row disabled the device; a reset record count gained nothing; wipe recovers"
        )
    }

    @Test(
        "deleting or editing a field of the device record, or putting back an earlier copy, gives no guess back: the 4 wrong claims stay on the user's budget (a new slot starts at 4), and an owner's unlock that goes through reports them",
        arguments: [
            "counterPin", "counterSlot", "retiredCounterSlots", "failures and notBefore", "salt",
            "the whole record from before",
        ])
    func recordEditsGiveNothingBack(field: String) throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "864200", currentPasscode: nil)
        try device.reboot()
        let earlier = try device.records.load()
        for guess in 0..<4 {
            #expect(
                code {
                    try device.unlock(passcode: SecureBytes(copying: Data("11111\(guess)".utf8)))
                }
                    == .authFailed)
        }
        let loaded = try device.records.load()
        var edited = loaded.record
        switch field {
        case "counterPin": edited.passcode.counterPin = nil
        case "counterSlot": edited.passcode.counterSlot = nil
        case "retiredCounterSlots": edited.passcode.retiredCounterSlots = nil
        case "failures and notBefore": (edited.failures, edited.notBefore) = (0, 0)
        case "salt": edited.passcode.salt = Data(repeating: 7, count: KeyDerivation.saltLength)
        default: edited = earlier.record
        }
        try writeStoredRecord(device, edited, at: loaded.path)
        // What the user's processes can reach says 4: a slot registered now starts there.
        let reader = EscrowProtocol.reader(secret: SecureBytes(randomCount: 32))
        let client = counter.configuration.client(peer: .user(PrivateEscrow.counterUser))
        let fresh = try client.register(
            SecureBytes(randomCount: 32), passcodeKey: SecureBytes(randomCount: 32),
            salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10,
            reader: reader.publicKey)
        #expect(try client.count(of: fresh.slot, reader: reader).count?.spent == 4, "\(field)")
        // The owner: refused (the record no longer checks), or unlocked and told the 4.
        if let report = try? device.unlockReporting(passcode: "864200") {
            #expect(report.wrongPasscodes?.count == 4, "\(field)")
        }
    }

    @Test(
        "another process of the user, holding everything the user holds (the device record, the counter's address), gets at most 10 passcode checks between two of the owner's unlocks, and the owner is told of each at the next: claims that skip Keepsake are counted and come back only with that report, the count is not told to it, a removal without the slot's secret and a rewritten salt are refused"
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
        let tamperedPath = try writeStoredRecord(device, tampered, at: loaded.path)
        #expect(code { try device.unlock(passcode: "246810") } == .corrupt)
        try writeStoredRecord(device, loaded.record, at: tamperedPath)
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
        // in three rounds with the owner's right unlock between them: each counted, and the
        // owner told of each round at the next unlock (only that gives them back); then 10 in a
        // row with no unlock between: the 10th destroys the slot.
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
        #expect(told == [5, 4, 3])
        #expect(answers == Array(repeating: .authFailed, count: 12))
        answers = []
        for _ in 0..<11 {
            let key = try PasscodeKeys.passcodeKey(
                SecureBytes(copying: Data("88888\(guess)".utf8)), salt: status.salt,
                cost: status.cost)
            guess += 1
            do throws(EscrowError) {
                _ = try client.claim(slot, passcodeKey: key, publicKey: status.publicKey)
            } catch { answers.append(error.code) }
        }
        #expect(
            answers == Array(repeating: .authFailed, count: 9)
                + Array(repeating: .destroyed, count: 2))
        #expect(code { try device.unlock(passcode: "246810") } == .disabled)
        print(
            "counter service: an outside process's rounds of 5, 4 and 3 were each told at the owner's next unlock; 10 in a row destroyed the slot"
        )
    }

    @Test(
        "another local user's flood — 40 half-open connections held and requests in a loop on the counter's socket — and 200 other users' slots neither fail nor starve the owner's unlocks"
    )
    func floodFromAnotherUser() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "517263", currentPasscode: nil)
        let socket = try #require(counter.configuration.socket)
        // Other users' slots beside the owner's: 200 of them, each of a uid of its own.
        #expect(try OtherUsers.registerSlots(socket: socket, count: 200) == 200)
        // Then the flood, for longer than the unlocks take even on a busy machine (ended below).
        let flood = try OtherUsers.flood(socket: socket, seconds: 300)
        defer { OtherUsers.stop(flood) }
        var times: [Double] = []
        for _ in 0..<5 {
            try device.reboot()
            let started = Date()
            try device.unlock(passcode: "517263")
            times.append(Date().timeIntervalSince(started))
            #expect(try device.state() == .unlocked)
        }
        #expect(flood.isRunning, "the flood ran throughout")
        print(
            "counter under another uid's flood: 5 unlocks, each \(times.map { String(format: "%.3f", $0) }) s"
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
        try device.records.exclusively { (held) throws(DeviceError) in
            let proof = try device.prove("111222", held)
            let keys = try PasscodeKeys.unwrap(proof.record.wrappedKeys, kek: proof.kek)
            var updated = proof.record
            try device.seal(keys, passcode: "333444", into: &updated)
            _ = try device.records.store(updated, replacing: proof.path, held)
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
        try writeStoredRecord(device, earlier, at: loaded.path)
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

@Suite(
    "Every route that proves the passcode tells the owner, and forgetting never waits",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"),
    .enabled(
        if: PrivateEscrow.canRunCounter, "the counter runs as a user of its own: needs root"))
struct PasscodeReportTests {
    @Test(
        "a lock-screen change and an item read with the passcode report the wrong passcodes before them, as an unlock does, each clearing what it showed"
    )
    func everyRouteReports() throws {
        let counter = try PrivateEscrow.counter()
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick, counter: counter)
        try device.setLockScreen(.pin, passcode: "902468", currentPasscode: nil)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000001") } == .authFailed)
        let change = try device.setLockScreen(.pin, passcode: "902469", currentPasscode: "902468")
        #expect(change.wrongPasscodes?.count == 1 && change.wrongPasscodes?.last != nil)
        #expect(try device.status().failedAttempts == 0)
        try device.reboot()
        #expect(code { try device.unlock(passcode: "000002") } == .authFailed)
        #expect(code { try device.unlock(passcode: "000003") } == .authFailed)
        let proved = try device.presenceSecretKey(passcode: "902469")
        #expect(proved.wrongPasscodes?.count == 2)
        #expect(try device.status().failedAttempts == 0)
        // Nothing wrong since: nothing to report.
        #expect(try device.unlockReporting(passcode: "902469").wrongPasscodes == nil)
    }

    @Test(
        "lock and reboot drop the runtime keys with the Secret Service frozen or gone: the device reads locked, then before first unlock, once it answers again"
    )
    func forgettingNeverWaits() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.pin, passcode: "5151", currentPasscode: nil)
        #expect(try device.state() == .unlocked)
        // Another process (a fresh Device on the same directory) locks while the provider is
        // frozen: no call reaches it.
        service.freeze()
        let started = Date()
        try service.device(retryPolicy: quick).lock()
        service.thaw()
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(try device.state() == .locked)
        service.kill()
        try service.device(retryPolicy: quick).reboot()
        try service.restart()
        #expect(try service.device(retryPolicy: quick).state() == .beforeFirstUnlock)
    }
}
