import Foundation
import KeepsakeTestSupport
import Testing

@Suite("keepsake blockstore, device join and device transfer")
struct BlockStoreCLITests {
    @Test(
        "store, retrieve, delete, e2ee and sync through the command line, then a second device joins"
    )
    func story() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try PrivateSecretService.start()
        let two = try PrivateSecretService.start()
        let escrow = try PrivateEscrow.of(cloud).url.absoluteString
        let device1 =
            deviceDirectory(of: one) + [
                "--cloud", cloud.path, "--escrow", escrow,
                "--app-id", "com.example.wallet",
            ]
        let device2 =
            deviceDirectory(of: two) + [
                "--cloud", cloud.path, "--escrow", escrow,
                "--app-id", "com.example.wallet",
            ]
        func run(_ args: [String], _ input: String = "", on service: PrivateSecretService) throws
            -> Run
        {
            try keepsake(args, input: Data(input.utf8), service: service)
        }
        #expect(
            try run(
                ["blockstore", "store", "--key", "hint", "--backup"] + device1, "0x8A…3F", on: one
            ).text == "9\n")
        #expect(try run(["blockstore", "store"] + device1, "default", on: one).text == "7\n")
        let all = try run(["blockstore", "retrieve", "--all"] + device1, on: one)
        let json = try #require(
            try JSONSerialization.jsonObject(with: all.stdout) as? [String: String])
        #expect(json["hint"].flatMap { Data(base64Encoded: $0) } == Data("0x8A…3F".utf8))
        #expect(json["com.google.android.gms.auth.blockstore.DEFAULT_BYTES_DATA_KEY"] != nil)
        #expect(try run(["blockstore", "e2ee"] + device1, on: one).text == "false\n")
        #expect(try run(["blockstore", "sync"] + device1, on: one).text.contains("\"uploaded\":0"))
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: cloud.path)) ?? []).isEmpty)
        let both = try run(["blockstore", "retrieve", "--all", "--key", "hint"] + device1, on: one)
        #expect(both.stderr.contains("DEVELOPER_ERROR (10)"))

        let created = try run(["lockscreen", "set", "--kind", "pin"] + device1, "1234\n", on: one)
        #expect(created.status == 0)
        // The account is created here: its recovery key is shown this once.
        #expect(
            created.text.range(
                of: #"\{"recoveryKey":"([A-Z2-7]{4}-){7}[A-Z2-7]{4}"\}"#,
                options: .regularExpression) != nil, "\(created.text)")
        #expect(try run(["blockstore", "e2ee"] + device1, on: one).text == "true\n")
        #expect(try run(["blockstore", "sync"] + device1, on: one).text.contains("\"uploaded\":1"))

        let wrong = try run(["device", "join", "--passcode"] + device2, "9999\n", on: two)
        #expect(wrong.status == 1 && wrong.stderr.contains("errSecAuthFailed (-25293)"))
        #expect(try run(["blockstore", "retrieve", "--all"] + device2, on: two).text == "{}\n")
        let joined = try run(["device", "join", "--passcode"] + device2, "1234\n", on: two)
        #expect(joined.text.contains("\"restored\":1"), "\(joined.stderr)")
        let restored = try run(["blockstore", "retrieve", "--key", "hint"] + device2, on: two)
        #expect(restored.text.contains(Data("0x8A…3F".utf8).base64EncodedString()))

        #expect(
            try run(["blockstore", "delete", "--key", "nope"] + device1, on: one).text == "false\n")
        #expect(try run(["blockstore", "delete", "--all"] + device1, on: one).text == "true\n")

        // Limits and availability name Google's codes.
        for index in 0..<16 {
            _ = try run(["blockstore", "store", "--key", "k\(index)"] + device1, "x", on: one)
        }
        #expect(
            try run(["blockstore", "store", "--key", "k16"] + device1, "x", on: one).stderr
                .contains("TOO_MANY_ENTRIES (40001)"))
        #expect(
            try run(
                ["blockstore", "store", "--key", "big"] + device1,
                String(repeating: "x", count: 4094), on: one
            ).stderr.contains("MAX_SIZE_EXCEEDED (40000)"))
        #expect(
            try run(["device", "settings", "--block-store", "no"] + device1, on: one).status == 0)
        #expect(
            try run(["blockstore", "e2ee"] + device1, on: one).stderr.contains(
                "FEATURE_NOT_SUPPORTED (40002)"))
    }

    @Test("device transfer --out prints a one-time key; --in with it imports the entries")
    func transfer() throws {
        let one = try PrivateSecretService.start()
        let two = try PrivateSecretService.start()
        let device1 =
            deviceDirectory(of: one) + [
                "--app-id",
                "com.example.wallet",
            ]
        let device2 =
            deviceDirectory(of: two) + [
                "--app-id",
                "com.example.wallet",
            ]
        _ = try keepsake(
            ["blockstore", "store", "--key", "hint"] + device1, input: Data("carried".utf8),
            service: one)
        let bundle = Throwaway.untrusted("transfer").appendingPathComponent("bundle")
        let out = try keepsake(
            ["device", "transfer", "--out", bundle.path] + device1, service: one)
        let key = out.text.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.count == 64)
        #expect(
            try keepsake(
                ["device", "transfer", "--in", bundle.path] + device2,
                input: Data((String(repeating: "AB", count: 32) + "\n").utf8), service: two
            ).stderr.contains("INTERNAL_ERROR"))
        let imported = try keepsake(
            ["device", "transfer", "--in", bundle.path] + device2,
            input: Data((key.uppercased() + "\n").utf8),
            service: two)
        #expect(imported.text.contains("\"imported\":1"))
        #expect(
            try keepsake(
                ["blockstore", "retrieve", "--key", "hint"] + device2, service: two
            ).text.contains(Data("carried".utf8).base64EncodedString()))
        // The app's preferences travel too, by its device-transfer rules, with cloud backup off.
        _ = try keepsake(
            ["hint", "set", "--wallet", demoWallet, "--profile", "android"] + device1, service: one)
        let bundle2 = Throwaway.untrusted("transfer").appendingPathComponent("bundle")
        let key2 = try keepsake(
            ["device", "transfer", "--out", bundle2.path] + device1, service: one
        ).text
        let three = try PrivateSecretService.start()
        let device3 =
            deviceDirectory(of: three) + [
                "--app-id",
                "com.example.wallet",
            ]
        _ = try keepsake(
            ["device", "settings", "--block-store", "no"] + device3, service: three)
        #expect(
            try keepsake(
                ["device", "transfer", "--in", bundle2.path] + device3,
                input: Data(key2.uppercased().utf8),
                service: three
            ).status == 0)
        #expect(
            try keepsake(
                ["hint", "get", "--profile", "android"] + device3, service: three
            ).text.contains(demoWallet))
    }
}

@Suite(
    "keepsake device join, requests, approve and recovery-key",
    .enabled(
        if: PrivateSecretService.runsKeepsakesOwnRules, "Keepsake's own rule: gnome-keyring pass"))
struct JoinCLITests {
    @Test(
        "a new device joins by approval through the command line: the new device shows a code of its own, the same code typed on the existing device approves, the new device restores"
    )
    func approvalThroughTheCommandLine() throws {
        let cloud = Throwaway.untrusted("cloud")
        let one = try PrivateSecretService.start()
        let two = try PrivateSecretService.start()
        let device1 =
            deviceDirectory(of: one) + ["--cloud", cloud.path, "--app-id", "com.example.wallet"]
        let device2 =
            deviceDirectory(of: two) + ["--cloud", cloud.path, "--app-id", "com.example.wallet"]
        let created = try keepsake(
            ["lockscreen", "set", "--kind", "pin"] + device1, input: Data("1234\n".utf8),
            service: one)
        #expect(created.status == 0)
        let recovery = try #require(
            (try JSONSerialization.jsonObject(with: created.stdout) as? [String: String])?[
                "recoveryKey"])
        #expect(
            try keepsake(
                ["blockstore", "store", "--key", "hint", "--backup"] + device1,
                input: Data("welcome".utf8), service: one
            ).status == 0)
        #expect(try keepsake(["blockstore", "sync"] + device1, service: one).status == 0)
        // Without an escrow, --passcode names the other two ways.
        let noEscrow = try keepsake(
            ["device", "join", "--passcode"] + device2, input: Data("1234\n".utf8), service: two)
        #expect(
            noEscrow.status == 1 && noEscrow.stderr.contains("--approval")
                && noEscrow.stderr.contains("--recovery-key"))
        // The new device posts its request, shows its code and waits; the user types the code on
        // the existing device (`joinByApproval`).
        let lines = try joinByApproval(device2, on: two, approvedBy: device1, on: one)
        #expect(lines.contains("\"restored\":1"), "\(lines)")
        // Approving without a code is refused.
        let blind = try keepsake(["device", "approve"] + device1, service: one)
        #expect(blind.status != 0 && blind.stderr.contains("code"))
        let restored = try keepsake(
            ["blockstore", "retrieve", "--key", "hint"] + device2, service: two)
        #expect(restored.text.contains(Data("welcome".utf8).base64EncodedString()))
        // A third device joins with the recovery key; a replaced key retires it for new joins.
        let three = try PrivateSecretService.start()
        let device3 =
            deviceDirectory(of: three) + ["--cloud", cloud.path, "--app-id", "com.example.wallet"]
        let replaced = try keepsake(["device", "recovery-key"] + device1, service: one)
        #expect(replaced.status == 0)
        let old = try keepsake(
            ["device", "join", "--recovery-key"] + device3, input: Data((recovery + "\n").utf8),
            service: three)
        #expect(old.status == 1 && old.stderr.contains("errSecAuthFailed"))
        let newKey = try #require(
            (try JSONSerialization.jsonObject(with: replaced.stdout) as? [String: String])?[
                "recoveryKey"])
        let joined = try keepsake(
            ["device", "join", "--recovery-key"] + device3, input: Data((newKey + "\n").utf8),
            service: three)
        #expect(joined.status == 0 && joined.text.contains("\"restored\":1"), "\(joined.stderr)")
        let usage = try keepsake(
            ["device", "join", "--approval", "--passcode"] + device3, service: three)
        #expect(usage.status == 2)

        // The account's devices; removing one rotates the account key away from it.
        func devices(_ arguments: [String], _ service: PrivateSecretService) throws -> [[String:
            Any]]
        {
            let listed = try keepsake(["device", "devices"] + arguments, service: service)
            return try #require(
                try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]],
                "\(listed.stderr)")
        }
        #expect(try devices(device1, one).count == 3)
        let twoID = try #require(
            try devices(device2, two).first { $0["thisDevice"] as? Bool == true }?["id"] as? String)
        #expect(
            try keepsake(["device", "remove", "--id", "not-an-id"] + device1, service: one).status
                == 2)
        // The second device gets a pin of its own (its copies can go to the cloud from now on).
        #expect(
            try keepsake(
                ["lockscreen", "set", "--kind", "pin"] + device2, input: Data("4321\n".utf8),
                service: two
            ).status == 0)
        // The day of the removal (UTC), read on either side of it: midnight may fall between.
        func utcDay() -> String {
            ISO8601DateFormatter.string(
                from: Date(), timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate]
            )
        }
        let dayBefore = utcDay()
        let removed = try keepsake(["device", "remove", "--id", twoID] + device1, service: one)
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try devices(device1, one).map { $0["id"] as? String }.contains(twoID) == false)
        let left = try keepsake(["device", "devices"] + device2, service: two)
        #expect(
            left.status == 1 && left.stderr.contains("not in a cloud account"), "\(left.stderr)")
        // Its syncs say it was removed, and what to do — never a bare "skipped".
        let days = [dayBefore, utcDay()]
        func saysRemoved(_ text: String) -> Bool {
            days.contains { text.contains("was removed from the cloud account on \($0)") }
        }
        let gone = try keepsake(["blockstore", "sync"] + device2, service: two)
        #expect(
            gone.status == 0
                && saysRemoved(gone.text)
                && gone.text.contains("join it again"), "\(gone.text) \(gone.stderr)")
        let goneKeychain = try keepsake(["keychain", "sync"] + device2, service: two)
        #expect(
            saysRemoved(goneKeychain.text),
            "\(goneKeychain.text)")
        // The third device, joined without a pin of its own, stays in the account; its syncs
        // say why nothing goes up and what would change that.
        let stays = try keepsake(["blockstore", "sync"] + device3, service: three)
        #expect(
            stays.status == 0 && !stays.text.contains("join")
                && stays.text.contains("set a pin, pattern or password"),
            "\(stays.text) \(stays.stderr)")
    }
}
