import Foundation
import FoundationXML

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The cloud account on a WebDAV server (RFC 4918: Apache mod_dav, Nextcloud, …): each object a
/// resource in one collection, moved with GET / PUT / DELETE / PROPFIND through URLSession.
///
/// Untrusted like every cloud: responses are bounded in size (the object's kind cap, checked
/// against Content-Length and again while reading) and time (`timeout` per request); redirects
/// are not followed (credentials never go to another place); `http://` is accepted on loopback
/// only. The account's lock (`lock()`) is a `.lock` resource made with `PUT If-None-Match: *`,
/// which two devices cannot both create; one older than `lockLifetime` is taken as abandoned.
///
/// Not yet (issue 15): credentials from `~/.netrc` or a Keychain item, a CA-file option and
/// TLS tests, compare-and-swap of each object with `If-Match` (the account lock stands in),
/// retries with backoff, `keepsake cloud login`.
public struct WebDAVCloud: CloudStorage {
    public let url: URL
    private let authorization: String?
    public let timeout: TimeInterval
    static let lockLifetime: TimeInterval = 120

    /// - Throws: `CloudError` for a URL that is not `https://`, or `http://` off loopback.
    public init(
        url: URL, username: String? = nil, password: String? = nil, timeout: TimeInterval = 10
    )
        throws
    {
        let host = url.host ?? ""
        let loopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host)
        guard url.scheme == "https" || (url.scheme == "http" && loopback) else {
            throw CloudError("a WebDAV cloud is https://, or http:// on loopback only")
        }
        self.url = url.path.hasSuffix("/") ? url : url.appendingPathComponent("")
        if let username, let password {
            authorization = "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        } else {
            authorization = nil
        }
        self.timeout = timeout
    }

    private func resource(_ name: String) throws -> URL {
        url.appendingPathComponent(try CloudObjectName.checked(name))
    }

    public func read(_ name: String) throws -> Data? {
        let response = try send(
            "GET", try resource(name), limit: CloudObjectLimits.maximumSize(ofObjectNamed: name))
        switch response.status {
        case 200: return response.body
        case 404: return nil
        default: throw CloudError("GET \(name): HTTP \(response.status)")
        }
    }

    public func write(_ name: String, _ data: Data) throws {
        let response = try send("PUT", try resource(name), body: data)
        guard (200..<300).contains(response.status) else {
            throw CloudError("PUT \(name): HTTP \(response.status)")
        }
    }

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

    /// Takes the account's lock: creates `.lock` only if absent (`If-None-Match: *`), waiting
    /// while another device holds it; a lock older than `lockLifetime` (its holder died) is
    /// removed. Released (deleted) when the returned value goes.
    public func lock() throws -> AnyObject {
        let lockURL = url.appendingPathComponent(".lock")
        let deadline = Date().addingTimeInterval(Self.lockLifetime + timeout)
        let token = Data(UUID().uuidString.utf8)
        while true {
            let response = try send(
                "PUT", lockURL, body: token, headers: ["If-None-Match": "*"])
            if (200..<300).contains(response.status) {
                return Lock(cloud: self, url: lockURL)
            }
            guard response.status == 412 else {
                throw CloudError("taking the account lock: HTTP \(response.status)")
            }
            let held = try send("HEAD", lockURL)
            if let modified = held.lastModified,
                Date().timeIntervalSince(modified) > Self.lockLifetime
            {
                _ = try? send("DELETE", lockURL)
                continue
            }
            guard Date() < deadline else { throw CloudError("the account lock stays taken") }
            Thread.sleep(forTimeInterval: 0.05 + Double.random(in: 0..<0.1))
        }
    }

    private final class Lock {
        let cloud: WebDAVCloud
        let url: URL
        init(cloud: WebDAVCloud, url: URL) {
            self.cloud = cloud
            self.url = url
        }
        deinit { _ = try? cloud.send("DELETE", url) }
    }

    // MARK: - HTTP

    struct Response {
        var status: Int
        var body: Data
        var lastModified: Date?
    }

    /// One request, synchronously, within `timeout`; a body larger than `limit` is refused
    /// (announced or as it arrives) and a redirect is answered as the error it is here.
    fileprivate func send(
        _ method: String, _ target: URL, body: Data? = nil, headers: [String: String] = [:],
        limit: Int = 64 * 1024
    ) throws -> Response {
        var request = URLRequest(url: target, timeoutInterval: timeout)
        request.httpMethod = method
        request.httpBody = body
        if let authorization {
            request.setValue(authorization, forHTTPHeaderField: "Authorization")
        }
        for (key, value) in headers { request.setValue(value, forHTTPHeaderField: key) }
        let delegate = BoundedDelegate(limit: limit)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        let session = URLSession(
            configuration: configuration, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let task = session.dataTask(with: request)
        task.resume()
        guard delegate.done.wait(timeout: .now() + timeout + 1) == .success else {
            task.cancel()
            throw CloudError(
                "\(method) \(target.lastPathComponent): no answer within \(Int(timeout)) s")
        }
        return try delegate.result()
    }
}

/// Collects one response, refusing a body beyond its limit and every redirect.
private final class BoundedDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Sendable: fields are written on the session's delegate queue and read after `done`.
    let limit: Int
    let done = DispatchSemaphore(value: 0)
    private var body = Data()
    private var response: HTTPURLResponse?
    private var failure: Error?

    init(limit: Int) { self.limit = limit }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        self.response = response as? HTTPURLResponse
        if response.expectedContentLength > Int64(limit) {
            failure = CloudError("a response larger than \(limit) bytes")
            completionHandler(.cancel)
            return
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard failure == nil else { return }
        if body.count + data.count > limit {
            failure = CloudError("a response larger than \(limit) bytes")
            dataTask.cancel()
            return
        }
        body.append(data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        // The credentials went with the request; a challenge means they were refused.
        failure = CloudError("the WebDAV server refused the credentials")
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)  // never followed: the 3xx itself is the answer
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?)
    {
        if failure == nil, let error { failure = CloudError("\(error.localizedDescription)") }
        done.signal()
    }

    func result() throws -> WebDAVCloud.Response {
        if let failure { throw failure }
        guard let response else { throw CloudError("no HTTP response") }
        let modified = (response.value(forHTTPHeaderField: "Last-Modified")).flatMap {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            return formatter.date(from: $0)
        }
        return WebDAVCloud.Response(status: response.statusCode, body: body, lastModified: modified)
    }
}

/// The member names of a `207 Multi-Status` answer to `PROPFIND Depth: 1` (hrefs under the
/// collection, one level down, not collections themselves).
enum MultistatusNames {
    static func parse(_ body: Data, collection: String) throws -> [String] {
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
