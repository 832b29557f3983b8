import Foundation
import KeepsakeTestSupport
import Sealing
import Synchronization
import Testing

@testable import Device

@Suite("The cloud account on WebDAV (a private Apache httpd + mod_dav)")
struct WebDAVTests {
    @Test(
        "objects round-trip; a missing one reads nil; the listing names the members only; a wrong password is refused"
    )
    func objects() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let cloud = try WebDAVCloud(
            url: server.url, username: server.username, password: server.password)
        #expect(try cloud.list().isEmpty)
        try cloud.write("bs-0a", Data([1, 2, 3]))
        try cloud.write("account", Data("KAC1{}".utf8))
        #expect(try cloud.read("bs-0a") == Data([1, 2, 3]))
        #expect(try cloud.read("bs-0b") == nil)
        #expect(try cloud.list() == ["account", "bs-0a"])
        try cloud.delete("bs-0a")
        try cloud.delete("bs-0a")  // already gone: fine
        #expect(try cloud.list() == ["account"])
        // The bytes sit on the server's disk as they were sent (sealed, by the stores).
        #expect(
            FileManager.default.fileExists(
                atPath: server.documentRoot.appendingPathComponent("dav/account/account").path))
        let intruder = try WebDAVCloud(
            url: server.url, username: server.username, password: "wrong")
        #expect(throws: CloudError.self) { try intruder.read("account") }
        #expect(throws: CloudError.self) {
            try WebDAVCloud(url: URL(string: "http://example.com/dav/")!)
        }
    }

    @Test("an object larger than its kind's cap is refused before it is read whole")
    func oversized() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let cloud = try WebDAVCloud(
            url: server.url, username: server.username, password: server.password)
        try cloud.write("account", Data(count: 1_000_000))
        #expect(throws: CloudError.self) { try cloud.read("account") }
    }

    @Test("the account lock: a second taker waits until the first lets go")
    func lock() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let cloud = try WebDAVCloud(
            url: server.url, username: server.username, password: server.password)
        var first: AnyObject? = try cloud.lock()
        let taken = Mutex(false)
        let other = Thread {
            _ = try? cloud.lock()
            taken.withLock { $0 = true }
        }
        other.start()
        Thread.sleep(forTimeInterval: 0.5)
        #expect(taken.withLock { $0 } == false)
        first = nil
        _ = first
        let deadline = Date().addingTimeInterval(5)
        while !taken.withLock({ $0 }), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(taken.withLock { $0 })
    }

    @Test(
        "two devices share one WebDAV account: the phone's entry is restored on a tablet joined with the recovery key; a rolled-back manifest is refused"
    )
    func twoDevices() throws {
        let server = try PrivateWebDAV.start()
        defer { server.stop() }
        let cloud = try WebDAVCloud(
            url: server.url, username: server.username, password: server.password)
        let phoneService = try PrivateSecretService.start()
        let phone = Device(
            secretService: phoneService.connection(), directory: Throwaway.directory("phone"),
            cloud: cloud, tuning: .fast)
        let recovery = try #require(
            try phone.setLockScreen(.pin, passcode: "4711", currentPasscode: nil).recoveryKey)
        let session = try #require(try phone.cloudSession())
        let objects = CloudObjects(cloudKey: session.key, kind: CloudObjects.kind("kv-"))
        let name = objects.name("com.example.wallet")
        try session.write(name, objects.seal(Data("welcome back".utf8), name: name))
        try session.commit()
        let manifestV1 = try #require(try cloud.read("account-manifest"))

        let tabletService = try PrivateSecretService.start()
        let tablet = Device(
            secretService: tabletService.connection(), directory: Throwaway.directory("tablet"),
            cloud: cloud, tuning: .fast)
        try tablet.join(recoveryKey: recovery)
        do {
            // A session holds the account's lock until it commits or goes: keep it short.
            let read = try #require(try tablet.cloudSession(forUpload: false))
            let bytes = try #require(try read.read(name))
            let opened = try CloudObjects(cloudKey: read.key, kind: CloudObjects.kind("kv-")).open(
                bytes, name: name
            ) { String(decoding: $0, as: UTF8.self) }
            #expect(opened == "welcome back")
        }
        // The phone writes again; the server puts the older manifest back: refused.
        let again = try #require(try phone.cloudSession())
        try again.write(name, objects.seal(Data("v2".utf8), name: name))
        try again.commit()
        _ = try tablet.cloudSession(forUpload: false)  // sees v2's manifest
        try cloud.write("account-manifest", manifestV1)
        #expect(throws: DeviceError.self) { try tablet.cloudSession(forUpload: false) }
    }
}
