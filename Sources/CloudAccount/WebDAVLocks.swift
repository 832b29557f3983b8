internal import CKeepsakeHTTP
import Device
import Foundation
import FoundationXML
import Platform
import Sealing
import Synchronization

/// The account's lock on a WebDAV server (RFC 4918 `LOCK`), its refreshes and release, and the
/// tokens a process of this device noted so that the next one releases a lock a dead one left.
extension WebDAVCloud: LocksOutliveProcesses {
    /// Takes the account's lock: an exclusive WebDAV write lock (RFC 4918 `LOCK`) on the
    /// collection's `.lock` resource, which the server grants to one holder at a time (a
    /// conditional PUT is no lock: Apache checks `If-None-Match` and writes in two steps, so two
    /// devices may both pass). Waits while another holder has it (423); the server lets a lock
    /// its holder never released expire after `lockLifetime`. Released (UNLOCK with its token)
    /// when the returned value goes.
    public func lock() throws -> AnyObject {
        // A live holder may keep it as long as a session may last (its refreshes stop there).
        let deadline = Date().addingTimeInterval(StrayObjects.age + timeout)
        var told = false
        while true {
            if let lock = try tryLock() { return lock }
            guard Date() < deadline else { throw CloudError("the account lock stays taken") }
            if !told {
                told = true
                Self.waitNotice.withLock { $0 }?(
                    "waiting for the cloud account's lock: another device or process is syncing (a holder that died lets go within \(Int(Self.lockLifetime)) s)"
                )
            }
            Thread.sleep(forTimeInterval: 0.05 + Double.random(in: 0..<0.1))
        }
    }

    /// Told once each time a `lock()` has to wait for another holder: the command line says so
    /// on standard error, so a waiting sync never sits in silence.
    package static let waitNotice = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// The account locks this process holds now, so that an interrupted command lets go of them
    /// before it exits (`releaseHeldLocks`).
    fileprivate static let held = Mutex<[ObjectIdentifier: WeakLock]>([:])
    fileprivate final class WeakLock: @unchecked Sendable {
        // @unchecked Sendable: read and written only under `held`'s lock.
        weak var lock: WebDAVLock?
        init(_ lock: WebDAVLock) { self.lock = lock }
    }

    /// Releases (UNLOCK, one try each) every account lock this process holds, at once: for a
    /// command interrupted by SIGINT or SIGTERM, just before it exits, so no other device waits
    /// for the lock to expire. The locks read as lost from then on: no compare-and-swap relies on
    /// them.
    package static func releaseHeldLocks() {
        let locks = held.withLock { held in held.values.compactMap(\.lock) }
        for lock in locks { lock.finish(attempts: 1) }
    }

    /// One try at the account's lock: the held lock, or nil while another holder has it (423).
    package func tryLock() throws -> AnyObject? {
        let lockURL = url.appendingPathComponent(".lock")
        var madeCollection = false
        var releasedStale = false
        // Each try names itself as the lock's owner: a LOCK whose answer was lost in transit
        // and sent again meets its own lock (423), which it then finds by that name and keeps —
        // never an orphan that blocks every device until it expires.
        let owner = "keepsake-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        while true {
            let sentBefore = requests.value
            let response = try send(
                "LOCK", lockURL, body: Self.lockBody(owner: owner), headers: Self.lockHeaders)
            if response.status == 423, requests.value - sentBefore > 1,
                let token = try ownLock(at: lockURL, owner: owner)
            {
                return WebDAVLock(
                    cloud: self, url: lockURL, token: token, lifetime: Self.lockLifetime)
            }
            if [404, 409].contains(response.status) || (response.status == 500 && !madeCollection) {
                // The account's collection does not exist yet (Apache answers 409, now and then
                // 404; rclone 500): made once.
                guard !madeCollection else {
                    throw CloudError(
                        "the WebDAV server answers LOCK with HTTP \(response.status) even after the account's collection was made: it cannot lock the account",
                        isTemporary: false)
                }
                try makeCollection()
                madeCollection = true
                continue
            }
            if [405, 501].contains(response.status) {
                throw CloudError(
                    "the WebDAV server does not support LOCK (HTTP \(response.status)): Keepsake needs a class 2 WebDAV server, whose locks keep two devices from syncing over each other (nginx: dav_ext_lock; Apache: DavLockDB)",
                    isTemporary: false)
            }
            if (200..<300).contains(response.status), let token = response.lockToken {
                let granted = Self.grantedSeconds(response.body).map(TimeInterval.init)
                return WebDAVLock(
                    cloud: self, url: lockURL, token: token,
                    lifetime: min(granted ?? Self.lockLifetime, Self.lockLifetime))
            }
            if (200..<300).contains(response.status) {
                throw CloudError(
                    "the WebDAV server answered LOCK without a lock token (HTTP \(response.status)): a pretend lock, as Nextcloud's, keeps no two devices from syncing over each other; Keepsake needs a class 2 WebDAV server (Apache mod_dav, nginx with dav_ext_lock, rclone, wsgidav)",
                    isTemporary: false)
            }
            guard response.status == 423 else {
                throw CloudError("taking the account lock: HTTP \(response.status)")
            }
            // Held — perhaps by a process of this device that died holding it (a sync killed
            // part-way): its lock is released now rather than waited out.
            if !releasedStale, state.releaseStaleLocks(of: self, at: lockURL) {
                releasedStale = true
                continue
            }
            return nil
        }
    }

    /// The token of the lock at `target` when its owner is `owner` (`PROPFIND` of its
    /// `lockdiscovery`), else nil.
    private func ownLock(at target: URL, owner: String) throws -> String? {
        let body = Data(
            #"<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><lockdiscovery/></prop></propfind>"#
                .utf8)
        let found = try send(
            "PROPFIND", target, body: body,
            headers: ["Depth": "0", "Content-Type": "application/xml"], attempts: 1)
        let text = String(decoding: found.body, as: UTF8.self)
        guard found.status == 207, text.contains(owner),
            let href = text.range(of: "locktoken>", options: .caseInsensitive),
            let start = text.range(
                of: "href>", options: .caseInsensitive, range: href.upperBound..<text.endIndex),
            let end = text.range(of: "<", range: start.upperBound..<text.endIndex)
        else { return nil }
        let token = text[start.upperBound..<end.lowerBound].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : "<\(token)>"
    }

    /// Releases the lock `token` holds on `target` (only that token's holder can).
    func unlock(_ target: URL, token: String, attempts: Int? = nil) throws
        -> HTTP.Response
    {
        try send("UNLOCK", target, headers: ["Lock-Token": token], attempts: attempts)
    }

    /// Where this device notes the lock tokens its processes hold (its directory's
    /// `cloud-locks`), so that one left by a process that died is released by the next.
    package func keepLockTokens(in file: URL) {
        state.tokenFile.withLock { $0 = file }
    }

    static func lockBody(owner: String = "keepsake") -> Data {
        Data(
            (#"<?xml version="1.0" encoding="utf-8"?><lockinfo xmlns="DAV:"><lockscope><exclusive/></lockscope><locktype><write/></locktype><owner>"#
                + owner + "</owner></lockinfo>").utf8)
    }
    /// The lifetime asked of the server, when a lock is taken and when it is refreshed.
    static let lockTimeout = "Second-\(Int(lockLifetime))"
    static let lockHeaders = [
        "Content-Type": "application/xml", "Depth": "0", "Timeout": lockTimeout,
    ]

    /// The seconds of a LOCK answer's `<timeout>Second-N</timeout>` (nil for none, `Infinite`,
    /// or anything else).
    static func grantedSeconds(_ body: Data) -> Int? {
        let text = String(decoding: body.prefix(16 * 1024), as: UTF8.self)
        guard let element = text.range(of: "timeout>", options: .caseInsensitive),
            let second = text.range(
                of: "Second-", options: .caseInsensitive, range: element.upperBound..<text.endIndex)
        else { return nil }
        let digits = text[second.upperBound...].prefix { $0.isASCII && $0.isNumber }.prefix(9)
        return Int(digits).flatMap { $0 > 0 ? $0 : nil }
    }

}

/// A held account lock: refreshed (RFC 4918 §9.10.2: `LOCK` with `If: (<token>)`) at half
/// the lifetime the server granted, for as long as it is held — a sync longer than the
/// server's lock timeout keeps it (nginx grants the zone's timeout, 60 s by default, whatever
/// is asked); released with `UNLOCK` when it goes. A refresh that fails marks the lock lost:
/// a compare-and-swap that relies on it then fails instead of writing unguarded.
fileprivate final class WebDAVLock {
    let cloud: WebDAVCloud
    let url: URL
    let token: String
    private let stop = DispatchSemaphore(value: 0)
    /// Set once released; a refresh is sent only while it is false, under this lock, so no
    /// refresh ever reaches the server after the UNLOCK.
    private let released = Released()

    private final class Released: Sendable {
        private let flag = Mutex(false)
        func withLock<R>(_ body: (inout Bool) -> R) -> R { flag.withLock { body(&$0) } }
    }

    /// Set once released (`finish`): by its owner letting it go, or by an interruption.
    private let finished = Mutex(false)

    init(cloud: WebDAVCloud, url: URL, token: String, lifetime: TimeInterval) {
        self.cloud = cloud
        self.url = url
        self.token = token
        defer {
            let weak = WebDAVCloud.WeakLock(self)
            WebDAVCloud.held.withLock { $0[ObjectIdentifier(self)] = weak }
        }
        let generation = cloud.state.acquired()
        cloud.state.noteToken(token, for: url)
        let stop = self.stop
        let released = self.released
        // Refreshed only while the whole hold stays within what a stray waits before it is
        // removed (`StrayObjects.age`, less a margin): a session never outlives that rule.
        let holdUntil = Date().addingTimeInterval(
            StrayObjects.age - WebDAVCloud.lockLifetime / 4 - lifetime)
        // A client of its own: a refresh never waits behind the session's requests.
        let refreshing = cloud.withLaneConnection()
        let condition = token.hasPrefix("<") ? "(\(token))" : "(<\(token)>)"
        let state = cloud.state
        Thread {
            while stop.wait(timeout: .now() + max(0.5, lifetime / 2)) == .timedOut {
                guard Date() < holdUntil else { return }
                let refreshed = released.withLock { released -> Bool? in
                    guard !released else { return nil }
                    let answer = try? refreshing.send(
                        "LOCK", url,
                        headers: ["If": condition, "Timeout": WebDAVCloud.lockTimeout])
                    return answer.map { (200..<300).contains($0.status) } ?? false
                }
                guard let refreshed else { return }
                guard refreshed else {
                    state.lost(generation)
                    return
                }
            }
        }.start()
    }

    // Only this holder's token unlocks it; a repeated UNLOCK of a released lock is refused.
    deinit {
        WebDAVCloud.held.withLock { $0[ObjectIdentifier(self)] = nil }
        finish()
    }

    /// Stops the refreshes, marks the lock released and sends UNLOCK, once.
    func finish(attempts: Int? = nil) {
        guard
            finished.withLock({ done in
                defer { done = true }; return !done
            })
        else { return }
        released.withLock { $0 = true }
        stop.signal()
        cloud.state.released()
        if (try? cloud.unlock(url, token: token, attempts: attempts)) != nil {
            cloud.state.forgetToken(token)
        } else {
            // No answer (the server down, the network gone): the lock may outlive this
            // process's hold, so its token stays noted as no live process's, and the next
            // try at the lock on this device releases it at once instead of waiting it out.
            cloud.state.orphanToken(token)
        }
    }
}

/// What a client and its copies share about the server: its capabilities once learnt, and
/// whether this client holds the account's lock now (and whether a refresh of it failed).
final class ServerState: Sendable {
    let capabilities = Mutex<WebDAVCapabilities?>(nil)
    private let hold = Mutex<(depth: Int, generation: Int, lost: Bool)>((0, 0, false))

    /// A lock was taken: its generation, for `lost(_:)`.
    func acquired() -> Int {
        hold.withLock { hold in
            if hold.depth == 0 { hold.lost = false }
            hold.depth += 1
            hold.generation += 1
            return hold.generation
        }
    }
    func released() { hold.withLock { $0.depth = max(0, $0.depth - 1) } }
    /// A refresh of lock `generation` failed: the lock may be another's now.
    func lost(_ generation: Int) {
        hold.withLock { if $0.generation == generation && $0.depth > 0 { $0.lost = true } }
    }
    var holdsLock: Bool { hold.withLock { $0.depth > 0 } }
    var lockLost: Bool { hold.withLock { $0.lost } }

    /// The device's note of the lock tokens its processes hold (`keepLockTokens(in:)`): a line
    /// `<pid> <process start time> <lock URL> <token>` per held lock.
    let tokenFile = Mutex<URL?>(nil)

    private func editTokens(_ edit: (inout [[String]]) -> Void) {
        guard let file = tokenFile.withLock({ $0 }) else { return }
        // One process of the device edits the note at a time.
        guard let guardLock = try? FileLock(file.appendingPathExtension("lock")) else { return }
        withExtendedLifetime(guardLock) {
            let text =
                ((try? Files.read(file, limit: 64 * 1024)) ?? nil).map {
                    String(decoding: $0, as: UTF8.self)
                } ?? ""
            var lines = text.split(separator: "\n").map {
                $0.split(separator: " ").map(String.init)
            }
            .filter { $0.count == 4 }
            edit(&lines)
            let joined = lines.map { $0.joined(separator: " ") + "\n" }.joined()
            try? Files.writeAtomically(Data(joined.utf8), to: file)
        }
    }

    func noteToken(_ token: String, for url: URL) {
        guard !token.contains(" "), let started = Self.startTime(of: getpid()) else { return }
        editTokens { $0.append(["\(getpid())", started, url.absoluteString, token]) }
    }

    func forgetToken(_ token: String) { editTokens { $0.removeAll { $0[3] == token } } }

    /// Notes `token` as held by no live process (pid 0, which never has a start time), so that
    /// `releaseStaleLocks` releases it.
    func orphanToken(_ token: String) {
        editTokens { lines in
            for index in lines.indices where lines[index][3] == token {
                lines[index][0] = "0"
                lines[index][1] = "-"
            }
        }
    }

    /// UNLOCKs the locks at `url` noted by processes that are gone (their pid ended, or is
    /// another process now); true when there was one.
    func releaseStaleLocks(of cloud: WebDAVCloud, at url: URL) -> Bool {
        var stale: [String] = []
        editTokens { lines in
            lines.removeAll { line in
                guard line[2] == url.absoluteString, let pid = Int32(line[0]),
                    Self.startTime(of: pid) != line[1]
                else { return false }
                stale.append(line[3])
                return true
            }
        }
        for token in stale { _ = try? cloud.unlock(url, token: token, attempts: 1) }
        return !stale.isEmpty
    }

    /// A process's start time (field 22 of `/proc/PID/stat`), which tells a reused pid apart.
    static func startTime(of pid: Int32) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? String(fields[19]) : nil
    }
}
