import Device
import Foundation
import KeepsakeCLI
import KeepsakeTestSupport

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
        ]))
