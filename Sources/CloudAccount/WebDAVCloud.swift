internal import CKeepsakeHTTP
import Device
import Foundation
import FoundationXML
import Platform
import Sealing
import Synchronization

/// The cloud account on a WebDAV server (RFC 4918: Apache mod_dav, Nextcloud, …): each object a
/// resource in one collection, moved with GET / PUT / DELETE / PROPFIND over libcurl.
///
/// Untrusted like every cloud: responses are bounded in size (the object's kind cap, announced or
/// as it arrives) and time (`timeout` per request, connection included); redirects are never
/// followed (credentials go to this URL's host only); TLS peers are verified, against `caFile`
/// when given; `http://` is accepted on loopback only. Requests that fail in transit or with a
/// 5xx are tried again, at most `attempts` times with growing pauses. Writes that two devices may
/// race are compare-and-swaps (`write(_:_:ifVersion:)`: `If-Match` / `If-None-Match: *`). The
/// account's lock (`lock()`) is an exclusive WebDAV write lock (`LOCK`) on the collection's
/// `.lock` resource, expiring after `lockLifetime` when its holder never releases it.
public struct WebDAVCloud: CloudStorage {
    /// The account's collection on the server, ending in `/`: each object is a resource in it.
    public let url: URL
    private let credentials: (user: String, password: String)?
    /// Seconds each request may take, connecting included.
    public let timeout: TimeInterval
    /// A PEM file of the certificate authorities to trust instead of the system's.
    public let caFile: String?
    /// Tries per request (the first and the retries).
    public let attempts: Int
    /// How many HTTP requests this client (and its copies) sent: for the benchmark and tests.
    package let requests = RequestCounter()
    /// One libcurl handle for this client and its copies: connections and TLS sessions reused.
    private var connection = HTTP.Client()
    /// The handles of the parallel lanes (`inLanes`), kept between calls like `connection`.
    private let lanePool = LanePool()
    /// What this client (and its copies) learnt of the server, and whether it holds the lock.
    let state = ServerState()
    /// The account lock's lifetime as asked of the server: short, since its holder refreshes it
    /// (`Lock`), so a holder that crashed blocks the other devices for at most this long.
    static let lockLifetime: TimeInterval = 30

    /// - Throws: `CloudError` for a URL that is not `https://`, or `http://` off loopback.
    public init(
        url: URL, username: String? = nil, password: String? = nil, timeout: TimeInterval = 10,
        caFile: String? = nil, attempts: Int = 3
    ) throws {
        let host = url.host ?? ""
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
        guard url.scheme == "https" || (url.scheme == "http" && loopback) else {
            throw CloudError("a WebDAV cloud is https://, or http:// on loopback only")
        }
        guard url.user == nil, url.password == nil else {
            throw CloudError(
                "credentials never go in the cloud's URL (use ~/.netrc or keepsake cloud login)")
        }
        self.url = url.path.hasSuffix("/") ? url : url.appendingPathComponent("")
        if let username, let password {
            credentials = (username, password)
        } else {
            credentials = nil
        }
        self.timeout = timeout
        self.caFile = caFile
        self.attempts = max(1, attempts)
    }

    private func resource(_ name: String) throws -> URL {
        url.appendingPathComponent(try CloudObjectName.checked(name))
    }

    /// GETs the resource `name`: its bytes, or nil when the server has none (404).
    public func read(_ name: String) throws -> Data? {
        try readVersioned(name)?.data
    }

    /// GETs the resource `name` with its ETag as the version's tag; nil on a 404.
    public func readVersioned(_ name: String) throws -> VersionedObject? {
        let response = try send(
            "GET", try resource(name), limit: CloudObjectLimits.maximumSize(ofObjectNamed: name))
        switch response.status {
        case 200:
            return VersionedObject(
                data: response.body,
                version: CloudObjectVersion(of: response.body, tag: response.etag))
        case 404: return nil
        default: throw CloudError("GET \(name): HTTP \(response.status)")
        }
    }

    /// PUTs `data` as the resource `name`; any status outside 2xx is a `CloudError`.
    public func write(_ name: String, _ data: Data) throws {
        let response = try put(try resource(name), data, headers: [:])
        guard (200..<300).contains(response.status) else {
            throw CloudError("PUT \(name): HTTP \(response.status)")
        }
    }

    /// Several PUTs at once, on up to four connections of their own (the first failure is
    /// thrown once all are done).
    public func write(_ objects: [(name: String, data: Data)]) throws {
        try inLanes(objects.count) { client, index in
            try client.write(objects[index].name, objects[index].data)
        }
    }

    /// Several GETs at once, on up to four connections of their own.
    public func read(_ names: [String]) throws -> [String: Data] {
        let found = Found()
        try inLanes(names.count) { client, index in
            if let bytes = try client.read(names[index]) { found.add(names[index], bytes) }
        }
        return found.all
    }

    /// Runs `body` for every index below `count`, on up to four lanes each with a connection of
    /// its own (one item: here, on this client's); stops taking new items after a failure and
    /// throws the first once all lanes are done. Bodies own what they use (`@Sendable`).
    private func inLanes(
        _ count: Int, _ body: @escaping @Sendable (WebDAVCloud, Int) throws -> Void
    ) throws {
        guard count > 1 else {
            if count == 1 { try body(self, 0) }
            return
        }
        let lanes = min(LanePool.width, count)
        let failure = FirstFailure()
        // A thread per lane: the lanes wait on the network, so they are not bounded by the
        // cores as `concurrentPerform` would bound them.
        let group = DispatchGroup()
        for lane in 0..<lanes {
            group.enter()
            let client = withLaneConnection()
            let pool = lanePool
            Thread {
                defer {
                    pool.put(client.connection)
                    group.leave()
                }
                for index in stride(from: lane, to: count, by: lanes) {
                    guard !failure.happened else { return }
                    do { try body(client, index) } catch { failure.record(error) }
                }
            }.start()
        }
        group.wait()
        if let error = failure.first { throw error }
    }

    /// What several lanes read.
    private final class Found: Sendable {
        private let objects = Mutex<[String: Data]>([:])
        var all: [String: Data] { objects.withLock { $0 } }
        func add(_ name: String, _ bytes: Data) { objects.withLock { $0[name] = bytes } }
    }

    /// The first error of several lanes.
    private final class FirstFailure: Sendable {
        private let error = Mutex<(any Error)?>(nil)
        var happened: Bool { error.withLock { $0 != nil } }
        var first: (any Error)? { error.withLock { $0 } }
        func record(_ new: any Error) { error.withLock { $0 = $0 ?? new } }
    }

    /// This client on a lane's connection (the same account, credentials and counter): one kept
    /// from an earlier batch when there is one, so its connection and TLS session are reused.
    func withLaneConnection() -> WebDAVCloud {
        var copy = self
        copy.connection = lanePool.take()
        return copy
    }

    /// Idle lane connections of a client and its copies.
    final class LanePool: Sendable {
        static let width = 4
        private let idle = Mutex<[HTTP.Client]>([])
        func take() -> HTTP.Client { idle.withLock { $0.popLast() } ?? HTTP.Client() }
        func put(_ client: HTTP.Client) {
            idle.withLock { if $0.count < Self.width { $0.append(client) } }
        }
    }

    /// A PUT; when it failed as servers fail for a missing collection (409 as RFC 4918 says;
    /// rclone 404, nginx 500), the account's collection is made (MKCOL) and, when it was indeed
    /// missing, the PUT tried once more.
    private func put(_ target: URL, _ data: Data, headers: [String: String]) throws -> HTTP.Response
    {
        let response = try send("PUT", target, body: data, headers: headers)
        guard [404, 409, 500].contains(response.status), try makeCollection() else {
            return response
        }
        return try send("PUT", target, body: data, headers: headers)
    }

    /// MKCOL of the account's collection, for a request that met its absence: true when it was
    /// made now, false when it was there already (405: made meanwhile by another device, or the
    /// request failed for another reason).
    @discardableResult
    func makeCollection() throws -> Bool {
        let made = try send("MKCOL", url)
        guard (200..<300).contains(made.status) || made.status == 405 else {
            throw CloudError("MKCOL of the account's collection: HTTP \(made.status)")
        }
        return made.status != 405
    }

    /// A compare-and-swap: `If-None-Match: *` when `expected` is nil, `If-Match` with a strong
    /// ETag. A 412 is told apart from a real conflict by what the server holds then: our own
    /// bytes (an earlier try of this write got through) is success; the bytes we expected (the
    /// ETag was weak or changed form — Apache gives weak ETags for a second after a change, and
    /// RFC 7232 forbids matching those) is tried again on the fresh tag; anything else is the
    /// other writer's, and this write lost (false).
    public func write(_ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?)
        throws -> Bool
    {
        let capabilities = try capabilities()
        guard capabilities.conditionalWrites else {
            if let refusal = capabilities.refusal { throw CloudError(refusal, isTemporary: false) }
            return try swapUnderLock(name, data, ifVersion: expected)
        }
        let target = try resource(name)
        var expected = expected
        for attempt in 0..<4 {
            var headers: [String: String] = [:]
            if let wanted = expected {
                guard let tag = wanted.tag, !tag.hasPrefix("W/") else {
                    // No strong tag to match (Apache's stay weak for a second after a change;
                    // some servers have none): compare what is there now.
                    guard let current = try readVersioned(name),
                        current.version.digest == wanted.digest
                    else { return false }
                    if let fresh = current.version.tag, !fresh.hasPrefix("W/"), attempt == 0 {
                        expected = current.version
                        continue
                    }
                    // The bytes matched just now, and every Keepsake writer holds the account's
                    // lock around a sync: the window is one round trip, and only a writer that
                    // ignores the lock could use it.
                    try write(name, data)
                    return true
                }
                headers["If-Match"] = tag
            } else {
                headers["If-None-Match"] = "*"
            }
            let response = try put(target, data, headers: headers)
            if (200..<300).contains(response.status) { return true }
            guard response.status == 412 else {
                throw CloudError("PUT \(name): HTTP \(response.status)")
            }
            let current = try readVersioned(name)
            if current?.version.digest == CloudObjectVersion(of: data, tag: nil).digest {
                return true
            }
            guard let current, let was = expected, current.version.digest == was.digest else {
                return false
            }
            expected = current.version
        }
        return false
    }

    /// A compare-and-swap on a server that ignores conditional writes (rclone, nginx): read,
    /// compare and write under the account's lock, which every Keepsake writer of such an object
    /// holds — taken here when this client does not hold it already.
    private func swapUnderLock(
        _ name: String, _ data: Data, ifVersion expected: CloudObjectVersion?
    )
        throws -> Bool
    {
        func swap() throws -> Bool {
            guard !state.lockLost else {
                throw CloudError("the account lock expired before this write: sync again")
            }
            let current = try readVersioned(name)
            if current?.version.digest == CloudObjectVersion(of: data, tag: nil).digest {
                return true
            }
            guard current?.version.digest == expected?.digest else { return false }
            try write(name, data)
            return true
        }
        if state.holdsLock { return try swap() }
        return try withExtendedLifetime(try lock()) { try swap() }
    }

    /// What the server honours: remembered (`remember(_:)`, a previous `probe()`), else probed now.
    package func capabilities() throws -> WebDAVCapabilities {
        if let known = state.capabilities.withLock({ $0 }) { return known }
        return try probe()
    }

    /// Takes what an earlier probe learnt (kept with the credentials by `keepsake cloud login`).
    package func remember(_ capabilities: WebDAVCapabilities) {
        state.capabilities.withLock { $0 = capabilities }
    }

    /// Tries what the account's safety rests on, on resources of its own beside the account's
    /// objects (made and removed again): the `DAV` classes the server names; whether a stale
    /// `If-Match` and an `If-None-Match: *` over an existing resource are refused; whether `LOCK`
    /// works and excludes a second locker, and for how long it grants a lock. Makes the account's
    /// collection when it is missing, as the first write would.
    package func probe() throws -> WebDAVCapabilities {
        let options = try send("OPTIONS", url)
        let classes = (options.dav ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let probe = url.appendingPathComponent(".probe-\(suffix)")
        let created = try put(probe, Data("probe".utf8), headers: ["If-None-Match": "*"])
        guard (200..<300).contains(created.status) else {
            throw CloudError("probing the WebDAV server: PUT answered HTTP \(created.status)")
        }
        defer { _ = try? send("DELETE", probe, attempts: 1) }
        let again = try send(
            "PUT", probe, body: Data("again".utf8), headers: ["If-None-Match": "*"])
        let stale = try send(
            "PUT", probe, body: Data("stale".utf8),
            headers: ["If-Match": "\"keepsake-stale-\(suffix)\""])
        let conditional = again.status == 412 && stale.status == 412
        let target = url.appendingPathComponent(".probe-lock-\(suffix)")
        defer { _ = try? send("DELETE", target, attempts: 1) }
        let first = try send("LOCK", target, body: Self.lockBody(), headers: Self.lockHeaders)
        var locking = WebDAVCapabilities.Locking.none
        var granted: Int?
        if (200..<300).contains(first.status), let token = first.lockToken {
            granted = Self.grantedSeconds(first.body)
            let second = try send("LOCK", target, body: Self.lockBody(), headers: Self.lockHeaders)
            if (200..<300).contains(second.status) {
                locking = .notExclusive
                if let other = second.lockToken { _ = try? unlock(target, token: other) }
            } else {
                locking = .exclusive
            }
            _ = try? unlock(target, token: token)
        } else if ![405, 501].contains(first.status) {
            throw CloudError("probing the WebDAV server: LOCK answered HTTP \(first.status)")
        }
        let learnt = WebDAVCapabilities(
            davClasses: classes, conditionalWrites: conditional, locking: locking,
            grantedLockSeconds: granted)
        remember(learnt)
        return learnt
    }

    /// DELETEs the resource `name`; one the server does not have (404) is no error.
    public func delete(_ name: String) throws {
        let response = try send("DELETE", try resource(name))
        guard (200..<300).contains(response.status) || response.status == 404 else {
            throw CloudError("DELETE \(name): HTTP \(response.status)")
        }
    }

    /// `PROPFIND Depth: 1` of the account's collection: the names of its members (not the
    /// collection itself, no subcollections), at most `CloudObjectLimits.maximumCount`.
    public func list() throws -> [String] {
        let body = Data(
            #"<?xml version="1.0"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>"#
                .utf8)
        let response = try send(
            "PROPFIND", url, body: body,
            headers: ["Depth": "1", "Content-Type": "application/xml"],
            limit: CloudObjectLimits.maximumCount * 512)
        if response.status == 404 { return [] }
        guard response.status == 207 else {
            throw CloudError("PROPFIND: HTTP \(response.status)")
        }
        let names = try MultistatusNames.parse(response.body, collection: url.path)
        guard names.count <= CloudObjectLimits.maximumCount else {
            throw CloudError(
                "the cloud account holds more than \(CloudObjectLimits.maximumCount) objects")
        }
        return names.filter { !$0.hasPrefix(".") }.sorted()
    }

    // MARK: - HTTP

    /// One request within `timeout`, tried again (up to `attempts` in all, pausing 0.2 s, 0.4 s,
    /// … with jitter) when it fails in transit or with a 5xx, and once after a 401: a server
    /// that refuses credentials it took a moment before (wsgidav does, now and then, under
    /// concurrent requests) is asked again before the user is told to log in again. A body larger
    /// than `limit` is refused (announced or as it arrives), never retried; a redirect is answered
    /// as the error it is here.
    func send(
        _ method: String, _ target: URL, body: Data? = nil, headers: [String: String] = [:],
        limit: Int = 64 * 1024, attempts: Int? = nil
    ) throws -> HTTP.Response {
        var failure: CloudError?
        var refusedOnce = false
        let attempts = attempts ?? self.attempts
        for attempt in 0..<attempts {
            if attempt > 0 {
                Thread.sleep(
                    forTimeInterval: 0.2 * Double(1 << (attempt - 1)) + Double.random(in: 0..<0.1))
            }
            requests.add()
            do {
                let response = try HTTP.exchange(
                    method, target, on: connection, credentials: credentials, headers: headers,
                    body: body, limit: limit, timeout: timeout, caFile: caFile)
                if response.status == 507 {  // full: trying again does not make room
                    throw CloudError(
                        "the WebDAV server has no room left (HTTP 507 Insufficient Storage): free space in the account, then sync again",
                        isTemporary: false)
                }
                if (500..<600).contains(response.status) && attempt + 1 < attempts {
                    failure = CloudError(
                        "\(method) \(target.lastPathComponent): HTTP \(response.status)")
                    continue
                }
                if (300..<400).contains(response.status) {
                    throw CloudError(
                        "\(method) \(target.lastPathComponent): redirected (HTTP \(response.status)), not followed"
                    )
                }
                if response.status == 401 && !refusedOnce && attempt + 1 < attempts {
                    refusedOnce = true
                    failure = CloudError(
                        "\(method) \(target.lastPathComponent): HTTP 401", isTemporary: false)
                    continue
                }
                if response.status == 401 || response.status == 403 {
                    throw CloudError(
                        "the WebDAV server refused the credentials (HTTP \(response.status)): log in again (`keepsake cloud login`)",
                        isTemporary: false)
                }
                return response
            } catch let error as HTTP.Failure {
                if error.isTooLarge { throw CloudError(error.message) }
                failure = CloudError("\(method) \(target.lastPathComponent): \(error.message)")
            }
        }
        throw failure ?? CloudError("\(method): no answer")
    }
}

/// A count shared by a client's copies.
package final class RequestCounter: Sendable {
    private let count = Mutex(0)
    package init() {}
    func add() { count.withLock { $0 += 1 } }
    package var value: Int { count.withLock { $0 } }
}

/// The member names of a `207 Multi-Status` answer to `PROPFIND Depth: 1` (hrefs under the
/// collection, one level down, not collections themselves).
enum MultistatusNames {
    static func parse(_ body: Data, collection: String) throws -> [String] {
        if let refusal = UntrustedXML.refusal(body) {
            throw CloudError("PROPFIND: the server's answer is refused: \(refusal) (XML)")
        }
        let delegate = Collector()
        let parser = XMLParser(data: body)
        parser.shouldProcessNamespaces = true
        parser.delegate = delegate
        guard parser.parse() else { throw CloudError("PROPFIND: not a multistatus document") }
        let base = collection.hasSuffix("/") ? collection : collection + "/"
        return delegate.responses.compactMap { response -> String? in
            guard !response.isCollection,
                let path = URLComponents(string: response.href)?.path
                    ?? response.href.removingPercentEncoding,
                path.hasPrefix(base)
            else { return nil }
            let name = String(path.dropFirst(base.count))
            return name.isEmpty || name.contains("/") ? nil : name
        }
    }

    private final class Collector: NSObject, XMLParserDelegate {
        struct Member {
            var href = ""
            var isCollection = false
        }
        var responses: [Member] = []
        private var current: Member?
        private var text = ""

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
            qualifiedName: String?, attributes: [String: String] = [:]
        ) {
            if element == "response" { current = Member() }
            if element == "collection" { current?.isCollection = true }
            text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(
            _ parser: XMLParser, didEndElement element: String, namespaceURI: String?,
            qualifiedName: String?
        ) {
            if element == "href" {
                current?.href = text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if element == "response", let member = current {
                responses.append(member)
                current = nil
            }
        }
    }
}
