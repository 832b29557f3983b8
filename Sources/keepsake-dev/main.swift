import CloudAccount
import Device
import Foundation
import KeepsakeCLI
import KeepsakeTestSupport
import SecretService

// The development tool, never a product: the whole `keepsake` command line on test devices'
// tuning (the cheapest Argon2id cost, short retry delays), plus the demo, the benchmarks and the
// load-test worker, which need the private Secret Service harness. The test suite and
// `scripts/demo` / `scripts/bench` run it; users install and run `keepsake`.
exit(
    KeepsakeCLI.main(
        tuning: .fastOnWallClock,
        extraCommands: [
            "demo": { _, context in try DemoCommand.run(context) },
            "bench": { verb, context in try BenchCommand.run(verb, context) },
            "stress": { _, context in try StressCommand.run(context) },
            "soak": { _, context in try SoakCommand.run(context) },
            // Takes the cloud account's lock, says so on standard output and holds it until the
            // process is ended: how the suite interrupts a command that holds the lock.
            "hold-cloud-lock": { _, context in
                guard
                    let cloud = try context.opened.cloud()
                else { throw HarnessError("hold-cloud-lock needs --cloud") }
                let lock = try cloud.lock()
                FileHandle.standardOutput.write(Data("held\n".utf8))
                withExtendedLifetime(lock) { while true { sleep(60) } }
            },
        ]))
