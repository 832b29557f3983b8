import Foundation
import KeepsakeTestSupport
import Sealing
import SecretService
import TPM
import Testing

@testable import Device

/// Tiny delays, so that ten wrong passcodes in a row take milliseconds: these tests are about
/// what is counted, not about how long the waits are (LockScreenTests pins the delays).

@Suite(
    "Passcode guesses on the software path: bound to the device secret, cost floor, atomic set, the passcode left nowhere in memory",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct GuessLimitTests {
    @Test("software path: the verifier and the key-encryption key need the device secret")
    func softwareBinding() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.pin, passcode: "8642", currentPasscode: nil)
        let record = try storedRecord(device)
        #expect(record.passcode.tpm == nil)
        let passcodeKey = try PasscodeKeys.passcodeKey(
            "8642", salt: try #require(record.passcode.salt),
            cost: try #require(record.passcode.cost))
        // Argon2id of the right passcode alone checks nothing and opens nothing.
        #expect(PasscodeKeys.version1Verifier(passcodeKey: passcodeKey) != record.passcode.verifier)
        #expect(throws: DeviceError.self) {
            try PasscodeKeys.unwrap(record.wrappedKeys, kek: passcodeKey)
        }
        // With the device secret (the login keyring's contents) it does: SECURITY.md says so.
        let secret = SecureBytes(copying: record.deviceSecret)
        #expect(
            PasscodeKeys.verifier(passcodeKey: passcodeKey, deviceSecret: secret)
                == record.passcode.verifier
        )
        #expect(try device.status().guessLimit == "software")
    }

    @Test("a stored Argon2id cost below the device's floor is raised at the next unlock")
    func costRaised() throws {
        let service = try PrivateSecretService.start()
        let cheap = service.device(retryPolicy: quick)
        try cheap.setLockScreen(.pin, passcode: "5555", currentPasscode: nil)
        #expect(try storedRecord(cheap).passcode.cost == .minimum)
        let real = service.device(
            tuning: DeviceTuning(passcodeCost: .interactive, retryPolicy: quick))
        try real.reboot()
        try real.unlock(passcode: "5555")
        #expect(try storedRecord(real).passcode.cost == .interactive)
        try real.reboot()
        try real.unlock(passcode: "5555")
        #expect(try real.state() == .unlocked)
    }

    @Test(
        "lockscreen set is atomic: when the Secret Service cannot write, nothing changed and the old passcode still unlocks",
        // gnome-keyring refuses a write it cannot save; KeePassXC keeps it in memory and answers
        // success (it saves later, or never), so a full disk is not a write failure there.
        .enabled(if: PrivateSecretService.defaultProvider == .gnomeKeyring)
    )
    func setIsAtomic() throws {
        let service = try PrivateSecretService.start(savesAfterEveryChange: true)
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.pin, passcode: "1111", currentPasscode: nil)
        try service.restart(fileSizeLimit: 0)  // gnome-keyring can no longer write its file
        #expect(
            code { try device.setLockScreen(.pin, passcode: "2222", currentPasscode: "1111") }
                == .notAvailable)
        #expect(
            code { try device.setLockScreen(.none, passcode: nil, currentPasscode: "1111") }
                == .notAvailable)
        try service.restart()  // what reached the disk
        try device.reboot()
        #expect(try device.lockScreenKind() == .pin)
        #expect(code { try device.unlock(passcode: "2222") } == .authFailed)
        try device.unlock(passcode: "1111")
        #expect(try device.state() == .unlocked)
    }

    @Test("a passcode that is not UTF-8 is refused with errSecParam and not counted")
    func invalidUTF8() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        try device.setLockScreen(.password, passcode: "pass-word", currentPasscode: nil)
        let invalid = SecureBytes(copying: [0x70, 0x61, 0xFF, 0x73, 0x73])
        #expect(code { try device.unlock(passcode: invalid) } == .invalidPasscode)
        #expect(
            code {
                try device.setLockScreen(.password, passcode: invalid, currentPasscode: "pass-word")
            } == .invalidPasscode)
        #expect(try device.status().failedAttempts == 0)
    }

    @Test("after an unlock no copy of the passcode is left in the process's memory")
    func passcodeNotInMemory() throws {
        let service = try PrivateSecretService.start()
        let device = service.device(retryPolicy: quick)
        // A random 16-digit pin made straight into owned memory: it exists nowhere else.
        let digits = SecureBytes(count: 16) { out in
            for index in out.indices { out[index] = 0x30 + UInt8.random(in: 0...9) }
        }
        try device.setLockScreen(.pin, passcode: digits, currentPasscode: nil)
        try device.reboot()
        try device.unlock(passcode: digits)
        let found = try memoryCopies(of: digits)
        #expect(found == 0, "copies of the passcode left in memory: \(found)")
        // And the search finds a copy when there is one: one made with malloc, whose address is
        // known. A search that misses it (a region another test's thread remapped meanwhile) is
        // made again with the map read anew; a miss every time says which map line held it.
        let control = malloc(digits.count)!
        defer { free(control) }
        digits.withUnsafeBytes { _ = memcpy(control, $0.baseAddress!, digits.count) }
        var seen = 0
        for _ in 0..<3 where seen == 0 { seen = try memoryCopies(of: digits) }
        let address = UInt(bitPattern: control)
        let holder =
            (try? processMaps())?
            .split(separator: "\n").first { line in
                let range = line.prefix { $0 != " " }.split(separator: "-")
                guard range.count == 2, let start = UInt(range[0], radix: 16),
                    let end = UInt(range[1], radix: 16)
                else { return false }
                return start <= address && address < end
            } ?? "none"
        #expect(seen >= 1, "a copy on the heap was not found (its map line: \(holder))")
    }
}

/// Counts copies of `secret`'s bytes in this process's readable anonymous memory (heap, stacks,
/// anonymous mappings), other than `secret`'s own buffer. The search makes no copy of its own: it
/// compares against the owned buffer in place, and reads each region into a scratch mapping
/// outside the heap that it skips and unmaps.
private func memoryCopies(of secret: SecureBytes) throws -> Int {
    let maps = try processMaps()
    let mem = open("/proc/self/mem", O_RDONLY)
    guard mem >= 0 else { throw HarnessError("/proc/self/mem") }
    defer { close(mem) }
    // One scratch mapping outside the heap for every read (made before the search, skipped by it).
    let chunk = 4 << 20
    guard
        let scratch = mmap(nil, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
        scratch != MAP_FAILED
    else { throw HarnessError("no scratch mapping") }
    defer { munmap(scratch, chunk) }
    let scratchStart = UInt(bitPattern: scratch)
    return secret.withUnsafeBytes { needle -> Int in
        let ownedStart = UInt(bitPattern: needle.baseAddress)
        var count = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            if fields.count >= 6,
                fields[5].hasPrefix("/") || fields[5] == "[vvar]"
                    || fields[5] == "[vsyscall]" || fields[5] == "[vdso]"
            {
                continue
            }
            let range = fields[0].split(separator: "-")
            guard let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
                end > start, end - start < 1 << 36  // a heap of several GiB is read too
            else { continue }
            // Read in chunks (overlapping by the needle's length less one): another test's
            // thread may unmap part of a region meanwhile, which ends a single read of the whole
            // region early and would hide what lies after the hole.
            if start < scratchStart + UInt(chunk) && end > scratchStart { continue }
            var at = start
            while at < end {
                let want = min(chunk, Int(end - at))
                let got = pread(mem, scratch, want, off_t(Int(bitPattern: at)))
                defer { at += UInt(max(want - (needle.count - 1), 1)) }
                guard got >= needle.count else { continue }
                // Each place the first byte occurs (memchr), then the rest compared there.
                let first = Int32(needle[0])
                var index = 0
                while index + needle.count <= got,
                    let found = memchr(scratch + index, first, got - needle.count + 1 - index)
                {
                    let offset = scratch.distance(to: found)
                    if memcmp(found, needle.baseAddress!, needle.count) == 0,
                        at + UInt(offset) != ownedStart
                    {
                        count += 1
                    }
                    index = offset + 1
                }
            }
        }
        return count
    }
}

/// `/proc/self/maps`, read to its end with read(2) until it returns 0. (Read through Foundation's
/// `String(contentsOfFile:)`, a large process's map came back without the lines that held the
/// heap: the file's size is 0 to stat.)
private func processMaps() throws -> String {
    let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw HarnessError("/proc/self/maps") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if got < 0 && errno == EINTR { continue }
        guard got >= 0 else { throw HarnessError("reading /proc/self/maps") }
        if got == 0 { break }
        bytes += buffer[..<got]
    }
    return String(decoding: bytes, as: UTF8.self)
}
