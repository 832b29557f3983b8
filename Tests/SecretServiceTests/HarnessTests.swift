import Foundation
import KeepsakeTestSupport
import Testing

@Suite("The test harness's own daemons")
struct HarnessTests {
    @Test(
        "a daemon that ended on its own is never signalled again: its pid may be another process's by then"
    )
    func endedDaemonIsNotSignalled() throws {
        let daemon = try Daemon("exec sleep 600", environment: ProcessInfo.processInfo.environment)
        #expect(daemon.isAlive)
        #expect(daemon.signal(0))
        // Ended by someone else: its guard reaps it and ends within about a second.
        kill(daemon.pid, SIGKILL)
        let deadline = Date().addingTimeInterval(5)
        while daemon.signal(0), Date() < deadline { usleep(20_000) }
        #expect(!daemon.isAlive)
        #expect(!daemon.signal(SIGKILL))
        daemon.stop()
    }
}
