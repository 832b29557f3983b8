import Foundation
import KeepsakeTestSupport
import Synchronization
import Testing

/// A new device joins by approval through the command line: it posts its request and shows its
/// code (a process that waits), the user types the code on the existing device. Returns the new
/// device's whole output (`{"restored": N}` at the end).
func joinByApproval(
    _ newDevice: [String], on new: PrivateSecretService, approvedBy existing: [String],
    on old: PrivateSecretService
) throws -> String {
    let process = Process()
    process.executableURL = keepsakeExecutable
    process.arguments = ["device", "join", "--approval", "--timeout", "60"] + newDevice
    process.environment = new.environment
    let output = Pipe()
    process.standardOutput = output
    // The joiner's error, for the failure message when no code comes.
    let errors = Throwaway.directory("join-errors").appendingPathComponent("stderr")
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    process.standardError = try FileHandle(forWritingTo: errors)
    process.standardInput = FileHandle.nullDevice
    try process.run()
    defer { if process.isRunning { process.terminate() } }
    // The existing device lists the request once it is there: its ID, never a code.
    var listed: [[String: Any]] = []
    for _ in 0..<300 where listed.isEmpty {
        let requests = try keepsake(["device", "requests"] + existing, service: old)
        listed =
            (try? JSONSerialization.jsonObject(with: requests.stdout) as? [[String: Any]]) ?? []
        if listed.isEmpty { usleep(100_000) }
    }
    #expect(listed.count == 1 && listed.first?.keys.sorted() == ["id"], "\(listed)")
    var lines = ""
    let reader = output.fileHandleForReading
    while !lines.contains("\"code\"") {
        let chunk = reader.availableData
        if chunk.isEmpty { break }
        lines += String(decoding: chunk, as: UTF8.self)
    }
    let code = try #require(
        lines.firstMatch(of: /"code":"([0-9]{6})"/).map { String($0.output.1) },
        "\(lines) \((try? String(contentsOf: errors, encoding: .utf8)) ?? "")")
    // The code is on the new device's screen only; the user types it on the existing one.
    let again = try keepsake(["device", "requests"] + existing, service: old)
    // (The listed ID is random hex, which could hold the six digits by chance: left out.)
    let listedID = listed.first?["id"] as? String ?? ""
    #expect(
        !again.text.replacingOccurrences(of: listedID, with: "").contains(code), "\(again.text)")
    let approved = try keepsake(["device", "approve", "--code", code] + existing, service: old)
    #expect(approved.status == 0, "\(approved.stderr)")
    lines += String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(lines)")
    return lines
}

@Suite(
    "every WebDAV server people run: the two-device story through the command line, or a clear refusal"
)
struct WebDAVServersCLITests {
    @Test(
        "on Apache, nginx with dav_ext_lock, rclone and wsgidav, over TLS: login probes the server; a fresh account URL; an account made with a pin; Block Store sync; an approval join that restores; welcome back; 20 syncs from each device at once, with adds, lose nothing; a changed server password says to log in again (exit 1) and a new login syncs",
        arguments: PrivateWebDAV.Server.available.filter { $0 != .nginxWithoutLocks })
    func twoDeviceStory(_ kind: PrivateWebDAV.Server) throws {
        let server = try PrivateWebDAV.start(kind, tls: true, passwordHash: .md5)
        defer { server.stop() }
        // A fresh account URL: its collection does not exist yet.
        let fresh = server.url.deletingLastPathComponent()
            .appendingPathComponent("fresh-\(UUID().uuidString.prefix(6).lowercased())/")
        let cloud = ["--cloud", fresh.absoluteString, "--cloud-ca", server.caFile.path]
        let phone = try PrivateSecretService.start()
        let tablet = try PrivateSecretService.start()
        let app = ["--app-id", "com.example.wallet"]
        let onPhone = deviceDirectory(of: phone) + cloud + app
        let onTablet = deviceDirectory(of: tablet) + cloud + app
        let credentials = Data("\(server.username)\n\(server.password)\n".utf8)
        for (device, service) in [(onPhone, phone), (onTablet, tablet)] {
            let login = try keepsake(
                ["cloud", "login"] + device, input: credentials, service: service)
            #expect(login.status == 0, "\(kind): \(login.stderr)")
            #expect(login.text.contains("\"usable\":true"), "\(kind): \(login.text)")
            #expect(
                login.text.contains("\"conditionalWrites\":\([.apache, .wsgidav].contains(kind))"),
                "\(login.text)")
        }
        #expect(
            try keepsake(["cloud", "status"] + onPhone, service: phone).text.contains(
                "\"locking\":\"exclusive\""))
        let created = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + onPhone, input: Data("2580\n".utf8),
            service: phone)
        #expect(created.status == 0 && created.text.contains("recoveryKey"), "\(created.stderr)")
        let passkey = "passkey secret \(UUID().uuidString)"
        #expect(
            try keepsake(
                ["blockstore", "store", "--key", "passkey", "--backup"] + onPhone,
                input: Data(passkey.utf8), service: phone
            ).status == 0)
        let wallet = demoWallet
        #expect(
            try keepsake(["hint", "set", "--wallet", wallet] + onPhone, service: phone).status
                == 0)
        let synced = try keepsake(["blockstore", "sync"] + onPhone, service: phone)
        #expect(synced.status == 0, "\(kind): \(synced.stderr)")

        let joined = try joinByApproval(onTablet, on: tablet, approvedBy: onPhone, on: phone)
        #expect(joined.contains("\"restored\":"), "\(kind): \(joined)")
        #expect(
            try keepsake(
                ["blockstore", "retrieve", "--key", "passkey"] + onTablet, service: tablet
            )
            .text.contains(Data(passkey.utf8).base64EncodedString()))
        #expect(
            try keepsake(["hint", "get"] + onTablet, service: tablet).text.contains(wallet),
            "welcome back on \(kind)")

        // The tablet's own pin: Block Store copies go up only under an E2EE-capable lock screen.
        let tabletPin = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + onTablet, input: Data("1379\n".utf8),
            service: tablet)
        #expect(tabletPin.status == 0, "\(kind): \(tabletPin.stderr)")

        // Both devices sync 20 times each, all at once, 7 of those syncs after an add of their own
        // (Block Store's 16 entries an app, less the passkey and the hint): every entry ends up in
        // the account.
        let perDevice = 20
        let addsPerDevice = 7
        let failures = Mutex<[String]>([])
        allAtOnce(2 * perDevice) { index in
            let (device, service, name) =
                index < perDevice
                ? (onPhone, phone, "phone-\(index)")
                : (onTablet, tablet, "tablet-\(index - perDevice)")
            do {
                if index % perDevice < addsPerDevice {
                    let stored = try keepsake(
                        ["blockstore", "store", "--key", name, "--backup"] + device,
                        input: Data("entry of \(name) \(UUID().uuidString)".utf8), service: service)
                    if stored.status != 0 {
                        failures.withLock { $0.append("\(name) store: \(stored.stderr)") }
                    }
                }
                let sync = try keepsake(["blockstore", "sync"] + device, service: service)
                if sync.status != 0 {
                    failures.withLock { $0.append("\(name) sync: \(sync.stderr)") }
                }
            } catch {
                failures.withLock { $0.append("\(name): \(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(kind): \(failures.withLock { $0 })")
        #expect(try keepsake(["blockstore", "sync"] + onPhone, service: phone).status == 0)
        #expect(try keepsake(["blockstore", "sync"] + onTablet, service: tablet).status == 0)
        let collection = server.documentRoot.appendingPathComponent("dav")
            .appendingPathComponent(fresh.lastPathComponent)
        // Distinct objects, each stored as `<object>_<its MAC's first 12 bytes>`: a copy that a
        // sync superseded (or wrote and then lost the race with) is removed at the next sync's
        // commit or once 240 s old, so racing syncs can leave more files than objects for a while.
        let entries = Set(
            try FileManager.default.contentsOfDirectory(atPath: collection.path)
                .filter { $0.hasPrefix("bs-") }
                .map { $0.split(separator: "_").first.map(String.init) ?? $0 })
        // The passkey, the hint's Block Store copy and every racing entry.
        #expect(entries.count == 2 + 2 * addsPerDevice, "\(kind): \(entries.count) entries")

        // A changed server password: exit 1 and "log in again", never 75 ("sync again later");
        // logging in with the new one syncs again. Then no credentials at all: the same.
        try server.changePassword()
        let refused = try keepsake(["blockstore", "sync"] + onPhone, service: phone)
        #expect(refused.status == 1 && refused.stderr.contains("log in again"), "\(refused.stderr)")
        let again = try keepsake(
            ["cloud", "login"] + onPhone,
            input: Data("\(server.username)\n\(server.password)\n".utf8), service: phone)
        #expect(again.status == 0, "\(kind): \(again.stderr)")
        #expect(try keepsake(["blockstore", "sync"] + onPhone, service: phone).status == 0)
        #expect(try keepsake(["cloud", "logout"] + onPhone, service: phone).status == 0)
        let loggedOut = try keepsake(["blockstore", "sync"] + onPhone, service: phone)
        #expect(loggedOut.status == 1 && loggedOut.stderr.contains("log in again"))
    }

    @Test(
        "nginx without dav_ext_lock is refused at cloud login — exit 1, naming dav_ext_lock — and nothing is kept; a lock screen set anyway makes no account and says why"
    )
    func serverWithoutLocksIsRefused() throws {
        let server = try PrivateWebDAV.start(.nginxWithoutLocks, tls: true, passwordHash: .md5)
        defer { server.stop() }
        let phone = try PrivateSecretService.start()
        let device =
            deviceDirectory(of: phone) + [
                "--cloud", server.url.absoluteString, "--cloud-ca", server.caFile.path,
            ]
        let login = try keepsake(
            ["cloud", "login"] + device,
            input: Data("\(server.username)\n\(server.password)\n".utf8), service: phone)
        #expect(login.status == 1, "\(login.text)")
        #expect(login.stderr.contains("dav_ext_lock") && login.stderr.contains("LOCK"))
        #expect(
            try keepsake(["cloud", "status"] + device, service: phone).text.contains(
                "\"credentials\":\"none\""))
        try "machine 127.0.0.1 login \(server.username) password \(server.password)\n".write(
            to: phone.home.appendingPathComponent(".netrc"), atomically: true, encoding: .utf8)
        chmod(phone.home.appendingPathComponent(".netrc").path, 0o600)
        let set = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + device, input: Data("2580\n".utf8),
            service: phone)
        #expect(set.status == 0)
        #expect(!set.text.contains("recoveryKey") && set.stderr.contains("LOCK"), "\(set.stderr)")
        #expect(try server.cloud().list().isEmpty)
    }
}
