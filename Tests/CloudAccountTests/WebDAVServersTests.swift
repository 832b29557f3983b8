import CloudAccount
import Device
import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

/// What each WebDAV server people run honours, as Keepsake finds it by trying, and how the
/// account's writes stay safe on each (the two-device story through the command line is in
/// `WebDAVServersCLITests`).
@Suite("WebDAV servers: what each honours, and safe writes on each")
struct WebDAVServersTests {
    @Test(
        "the probe finds what each server honours by trying it: Apache and wsgidav conditional writes and exclusive locks; nginx and rclone exclusive locks but conditional writes ignored; nginx without dav_ext_lock no locks, refused naming the fix",
        arguments: PrivateWebDAV.Server.available)
    func probe(_ kind: PrivateWebDAV.Server) throws {
        let server = try PrivateWebDAV.start(kind, tls: true, swept: false, passwordHash: .md5)
        defer { server.stop() }
        let found = try server.cloud().probe()
        switch kind {
        case .apache, .wsgidav:
            #expect(found.conditionalWrites && found.locking == .exclusive, "\(found)")
            #expect(found.davClasses.contains("2"))
        case .nginx, .rclone:
            #expect(!found.conditionalWrites && found.locking == .exclusive, "\(found)")
            #expect(found.refusal == nil)
        case .nginxWithoutLocks:
            #expect(found.locking == WebDAVCapabilities.Locking.none, "\(found)")
            #expect(found.refusal?.contains("dav_ext_lock") == true)
        }
        if kind == .nginx { #expect(found.grantedLockSeconds == 10) }
        // The probe leaves nothing behind in the account.
        #expect(try server.cloud().list().isEmpty)
    }

    @Test(
        "on servers that ignore conditional writes (nginx, rclone), a compare-and-swap still never writes over another's version: it is done under the account lock",
        arguments: [PrivateWebDAV.Server.nginx, .rclone])
    func compareAndSwapUnderTheLock(_ kind: PrivateWebDAV.Server) throws {
        let server = try PrivateWebDAV.start(kind, tls: true, swept: false, passwordHash: .md5)
        defer { server.stop() }
        let cloud = try server.cloud()
        #expect(try cloud.write("account-manifest", Data("one".utf8), ifVersion: nil))
        let first = try #require(try cloud.readVersioned("account-manifest"))
        // Another writer changes it; a swap against the old version loses and changes nothing.
        try server.cloud().write("account-manifest", Data("two".utf8))
        #expect(try !cloud.write("account-manifest", Data("three".utf8), ifVersion: first.version))
        #expect(try !cloud.write("account-manifest", Data("four".utf8), ifVersion: nil))
        #expect(try cloud.read("account-manifest") == Data("two".utf8))
        let second = try #require(try cloud.readVersioned("account-manifest"))
        #expect(try cloud.write("account-manifest", Data("five".utf8), ifVersion: second.version))
        #expect(try cloud.read("account-manifest") == Data("five".utf8))
        // Many writers racing one swap each from the same version: exactly one wins.
        let start = try #require(try cloud.readVersioned("account-manifest"))
        let wins = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 6) { index in
            guard let racer = try? server.cloud(),
                (try? racer.write(
                    "account-manifest", Data("racer \(index)".utf8), ifVersion: start.version))
                    == true
            else { return }
            wins.withLock { $0 += 1 }
        }
        #expect(wins.withLock { $0 } == 1)
    }

    @Test(
        "a session longer than the lock timeout the server grants keeps its lock: it is refreshed at half the granted time (nginx granting 3 s)"
    )
    func lockRefresh() throws {
        let server = try PrivateWebDAV.start(
            .nginx, tls: true, swept: false, passwordHash: .md5, lockSeconds: 3)
        defer { server.stop() }
        let holder = try server.cloud()
        let other = try server.cloud(timeout: 2, attempts: 1)
        do {
            let taken = server.answered.filter { $0 == "LOCK 200" }.count + 1
            let held = try holder.lock()
            // Three refreshes, one every 1.5 s: the granted 3 s are past by then.
            #expect(
                server.waitUntilAnswered("LOCK 200", count: taken + 3),
                "refreshed: \(server.answered)")
            // Still held: another taker is refused while it lasts.
            #expect(try other.tryLock() == nil)
            withExtendedLifetime(held) {}
        }
        // Released: the next taker has it at once.
        #expect(try other.tryLock() != nil)
    }

    @Test(
        "a lock left on the server by a process of this device that died (a sync killed part-way) is released by the next one, not waited out; one held by a live process is left alone"
    )
    func staleOwnLock() throws {
        let server = try PrivateWebDAV.start(swept: false)
        defer { server.stop() }
        let notes = Throwaway.directory("locks").appendingPathComponent("cloud-locks")
        let holder = try server.cloud()
        holder.keepLockTokens(in: notes)
        let next = try server.cloud()
        next.keepLockTokens(in: notes)
        // A live holder (this process): its lock stays.
        let held = try holder.lock()
        #expect(try next.tryLock() == nil)
        // The holder "dies" without releasing: its note now names a process that is gone.
        let deadPid = Int32.max - 1  // no process has it
        let text = try String(contentsOf: notes, encoding: .utf8)
        let fields = try #require(text.split(separator: "\n").first?.split(separator: " "))
        try ([String(deadPid), "0"] + fields[2...].map(String.init)).joined(separator: " ")
            .appending("\n").write(to: notes, atomically: true, encoding: .utf8)
        _ = Unmanaged.passRetained(held)  // never released by this process
        // The next one releases the dead holder's lock and takes it at once.
        let taken = try next.tryLock()
        #expect(taken != nil)
        #expect(server.answered.contains("UNLOCK 204"), "\(server.answered)")
    }
}
