import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A private Apache httpd with mod_dav on loopback (PROVIDERS.md): its own config, document root
/// and password file on a throwaway directory, basic authentication, started and killed by the
/// harness. Never the machine's own web server.
package final class PrivateWebDAV: @unchecked Sendable {
    // Sendable: immutable after start; `stop()` is idempotent.
    private var daemon: Daemon?
    package let root: URL
    package let port: Int
    package let username = "keepsake"
    package let password = "webdav-\(UUID().uuidString.prefix(8))"
    /// The account's collection.
    package var url: URL { URL(string: "http://127.0.0.1:\(port)/dav/account/")! }
    /// Apache's document root; the account's collection is `dav/account` in it (what the sweep
    /// looks at).
    package var documentRoot: URL { root.appendingPathComponent("htdocs") }

    /// Starts one (a few tries, each on another random port: one may be taken).
    package static func start() throws -> PrivateWebDAV {
        var failure: Error = HarnessError("Apache did not start")
        for _ in 0..<3 {
            let server = try PrivateWebDAV()
            do {
                try server.run()
                return server
            } catch {
                failure = error
                server.stop()
            }
        }
        throw failure
    }

    private init() throws {
        // Not under the 0700 throwaway root: Apache's workers run as www-data and must reach it.
        root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keepsake-webdav-\(UUID().uuidString.prefix(8).lowercased())")
        try FileManager.default.createDirectory(
            at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        Registry.shared.removeAtExit(root)
        port = Int.random(in: 20_000..<60_000)
    }

    private func run() throws {
        let account = documentRoot.appendingPathComponent("dav/account")
        try FileManager.default.createDirectory(at: account, withIntermediateDirectories: true)
        let htpasswd = root.appendingPathComponent("htpasswd")
        try tool("/usr/bin/htpasswd", ["-b", "-c", "-B", htpasswd.path, username, password])
        let conf = root.appendingPathComponent("httpd.conf")
        try """
        ServerRoot /usr/lib/apache2
        ServerName 127.0.0.1
        LoadModule mpm_event_module modules/mod_mpm_event.so
        LoadModule authz_core_module modules/mod_authz_core.so
        LoadModule authn_core_module modules/mod_authn_core.so
        LoadModule authn_file_module modules/mod_authn_file.so
        LoadModule auth_basic_module modules/mod_auth_basic.so
        LoadModule authz_user_module modules/mod_authz_user.so
        LoadModule dav_module modules/mod_dav.so
        LoadModule dav_fs_module modules/mod_dav_fs.so
        Listen 127.0.0.1:\(port)
        PidFile \(root.path)/httpd.pid
        ErrorLog \(root.path)/error.log
        User www-data
        Group www-data
        DocumentRoot \(documentRoot.path)
        DavLockDB \(root.path)/davlock
        <Directory \(documentRoot.path)>
          Dav On
          AuthType Basic
          AuthName keepsake
          AuthUserFile \(htpasswd.path)
          Require valid-user
        </Directory>
        """.write(to: conf, atomically: true, encoding: .utf8)
        try tool("/bin/chown", ["-R", "www-data:www-data", root.path])
        try tool("/bin/chmod", ["755", root.path])
        var environment = ProcessInfo.processInfo.environment
        environment["APACHE_RUN_DIR"] = root.path
        environment["APACHE_LOCK_DIR"] = root.path
        environment["APACHE_LOG_DIR"] = root.path
        // In the foreground under the harness's guard: gone when the test process is.
        daemon = try Daemon(
            "exec /usr/sbin/apache2 -f \(conf.path) -DFOREGROUND", environment: environment)
        let deadline = Date().addingTimeInterval(15)
        while (try? WebDAVProbe.status(url, username: username, password: password)) == nil {
            if Date() > deadline {
                let log =
                    (try? String(
                        contentsOf: root.appendingPathComponent("error.log"), encoding: .utf8))
                    ?? ""
                throw HarnessError("Apache did not come up on port \(port): \(log.suffix(600))")
            }
            usleep(50_000)
        }
    }

    /// Stops httpd and removes its files.
    package func stop() {
        daemon?.stop()
        daemon = nil
        // Its worker children exit once the parent is gone.
        try? FileManager.default.removeItem(at: root)
    }

    deinit { stop() }

    private func tool(_ path: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        var environment = ProcessInfo.processInfo.environment
        environment["APACHE_RUN_DIR"] = root.path
        environment["APACHE_LOCK_DIR"] = root.path
        environment["APACHE_LOG_DIR"] = root.path
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError("\(path) \(arguments.first ?? "") failed (apt-get install apache2)")
        }
    }
}

/// One authenticated OPTIONS request: whether the server answers at all.
enum WebDAVProbe {
    static func status(_ url: URL, username: String, password: String) throws -> Int {
        var request = URLRequest(url: url, timeoutInterval: 2)
        request.httpMethod = "OPTIONS"
        request.setValue(
            "Basic " + Data("\(username):\(password)".utf8).base64EncodedString(),
            forHTTPHeaderField: "Authorization")
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Int?>(nil)
        URLSession.shared.dataTask(with: request) { _, response, _ in
            result.withLock { $0 = (response as? HTTPURLResponse)?.statusCode }
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 3)
        guard let status = result.withLock({ $0 }) else { throw HarnessError("no answer") }
        return status
    }
}
