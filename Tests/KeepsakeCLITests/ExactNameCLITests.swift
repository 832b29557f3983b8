import Foundation
import KeepsakeTestSupport
import Testing

/// A name is its bytes across processes and a sync: two items whose services are canonically
/// equivalent (`"caf\u{E9}"`, `"cafe\u{301}"`), added by two processes, stay two items on this
/// device and on a device they reach by sync.
@Suite("A name is its bytes, across processes and a sync")
struct ExactNameCLITests {
    @Test("two canonically equivalent services are two items on both devices")
    func twoItemsSynced() throws {
        let pair = try Pair()
        // (Not a dictionary: Swift's would take the two names for one key.)
        let names = [("caf\u{E9}", "VICTIM's secret"), ("cafe\u{301}", "ATTACKER's secret")]
        func item(_ service: String) -> [String] {
            ["--service", service, "--account", "a", "--sync", "yes"]
        }
        for (service, value) in names {
            let added = try pair.run(0, ["keychain", "add"] + item(service), value)
            #expect(added.status == 0, "\(added.stderr)")
        }
        #expect(try pair.run(0, ["keychain", "sync"]).status == 0)
        #expect(try pair.run(1, ["keychain", "sync"]).status == 0)
        for device in [0, 1] {
            for (service, value) in names {
                let read = try pair.run(device, ["keychain", "get"] + item(service))
                #expect(read.status == 0 && read.text == value, "device \(device): \(read.text)")
            }
        }
        // A deletion of one on the second device leaves the other on both.
        #expect(try pair.run(1, ["keychain", "delete"] + item("cafe\u{301}")).status == 0)
        #expect(try pair.run(1, ["keychain", "sync"]).status == 0)
        #expect(try pair.run(0, ["keychain", "sync"]).status == 0)
        for device in [0, 1] {
            #expect(
                try pair.run(device, ["keychain", "get"] + item("caf\u{E9}")).text
                    == "VICTIM's secret")
            #expect(try pair.run(device, ["keychain", "get"] + item("cafe\u{301}")).status != 0)
        }
    }
}
