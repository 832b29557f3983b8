import Foundation

/// The method calls made on a private Secret Service's bus while something runs, as
/// `dbus-monitor` sees them (every client's: a lookup's own connections' `Hello` and match rules
/// included): what the benchmarks report and the tests hold commands to.
package struct BusCalls: CustomStringConvertible, Sendable {
    /// Calls to the Secret Service (every destination but the bus itself).
    package var toService = 0
    /// Calls to the bus (`org.freedesktop.DBus`).
    package var toBus = 0
    /// Connections made (`Hello`).
    package var connections = 0
    /// Searches for the device record (`SearchItems` for the device's schema): reads of it.
    package var deviceRecordSearches = 0
    /// Each call to the Secret Service by member name (`SearchItems`, `GetSecrets`, …).
    package var byMember: [String: Int] = [:]

    package var all: Int { toService + toBus }
    package var description: String {
        "\(all) (\(toService) to the Secret Service, \(toBus) to the bus, \(connections) connection\(connections == 1 ? "" : "s"), \(deviceRecordSearches) device record search\(deviceRecordSearches == 1 ? "" : "es"))"
    }

    /// The calls on `service`'s bus while `body` runs.
    package static func during(on service: PrivateSecretService, _ body: () throws -> Void) throws
        -> BusCalls
    {
        let log = Throwaway.directory("bus-calls").appendingPathComponent("monitor")
        // Its own shell, so that its output goes to `log` (the harness sends a daemon's own
        // output to a log of its own).
        let monitor = try Daemon(
            "exec /bin/sh -c 'exec /usr/bin/dbus-monitor --address \(service.busAddress) --monitor > \(log.path)'",
            environment: service.environment)
        defer { monitor.stop() }
        // Ready once it has said it is monitoring (its NameLost / NameAcquired signals).
        let deadline = Date().addingTimeInterval(30)
        while ((try? Data(contentsOf: log))?.isEmpty ?? true) && Date() < deadline {
            usleep(20_000)
        }
        try body()
        // Done once what the body's last call brought has been written out: the log stops
        // growing (a busy machine's monitor may lag behind the body).
        var size = -1
        while Date() < deadline.addingTimeInterval(30) {
            usleep(200_000)
            let now = (try? Data(contentsOf: log))?.count ?? 0
            if now == size { break }
            size = now
        }
        monitor.stop()
        return parse((try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }

    /// The calls in `dbus-monitor`'s output: each `method call` line with the argument lines
    /// below it.
    static func parse(_ text: String) -> BusCalls {
        var calls = BusCalls()
        var blocks: [[Substring]] = []
        for line in text.split(separator: "\n") {
            if line.first?.isWhitespace == true, !blocks.isEmpty {
                blocks[blocks.count - 1].append(line)
            } else {
                blocks.append([line])
            }
        }
        for block in blocks where block[0].hasPrefix("method call ") {
            let head = block[0]
            if head.contains("destination=org.freedesktop.DBus ") {
                calls.toBus += 1
                if head.contains("member=Hello") { calls.connections += 1 }
                continue
            }
            calls.toService += 1
            let member =
                head.split(separator: " ").first { $0.hasPrefix("member=") }?.dropFirst(7)
                ?? ""
            calls.byMember[String(member), default: 0] += 1
            if member == "SearchItems",
                block.contains(where: { $0.contains("org.keepsake.Device") })
            {
                calls.deviceRecordSearches += 1
            }
        }
        return calls
    }
}
