import CloudAccount
import Device
import Foundation

/// A private WebDAV server on loopback — Apache httpd with mod_dav (PROVIDERS.md), nginx with
/// dav-ext (with or without its locks), rclone's `serve webdav` or wsgidav — with its own config, document
/// root and password on a throwaway directory, basic authentication, optionally TLS with a
/// throwaway certificate authority, started and killed by the harness. Never the machine's own
/// web server, never the machine's trust store.
package final class PrivateWebDAV: @unchecked Sendable {
    // Sendable: immutable after start; `stop()` is idempotent.
    private var daemon: Daemon?
    /// The WebDAV servers people run, as Debian packages them.
    package enum Server: String, Sendable, CaseIterable, CustomStringConvertible {
        /// Apache 2.4 mod_dav + mod_dav_fs, `DavLockDB`: conditional writes, locks.
        case apache
        /// nginx's dav module with dav-ext and `dav_ext_lock`: exclusive locks (granted for the
        /// zone's timeout, 10 s here), conditional writes ignored.
        case nginx
        /// nginx with dav-ext but no `dav_ext_lock`: LOCK answers 405.
        case nginxWithoutLocks = "nginx-without-locks"
        /// rclone 1.60 `serve webdav`: exclusive locks, conditional writes ignored, 500 for a
        /// missing collection.
        case rclone
        /// WsgiDAV 4.3 (PyPI; on Debian's cheroot): conditional writes, exclusive locks, 409 for
        /// a missing collection.
        case wsgidav
        package var description: String { rawValue }

        /// The servers this machine can run: all, less wsgidav when its wheel could not be
        /// fetched (`scripts/install-system-packages` says so).
        package static var available: [Server] {
            allCases.filter {
                $0 != .wsgidav
                    || FileManager.default.fileExists(
                        atPath: wsgidavLibrary.appendingPathComponent("wsgidav").path)
            }
        }

        /// Where `scripts/install-system-packages` unpacks WsgiDAV's wheel.
        static var wsgidavLibrary: URL {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent(".build/third-party/wsgidav")
        }
    }
    package let server: Server
    package let root: URL
    package let port: Int
    package let tls: Bool
    /// Whether the suite-wide sweep looks at what the server held (`stop()` keeps a copy of the
    /// document root for it). Off for tests that put raw test bytes on the server themselves.
    private let swept: Bool
    /// How the server keeps the password it checks on every request.
    package enum PasswordHash: Sendable {
        /// bcrypt (`htpasswd -B`, cost 5): about 2 ms of server CPU per request on this machine.
        case bcrypt
        /// Apache's MD5 (`htpasswd` default): a fraction of a millisecond.
        case md5
    }
    private let passwordHash: PasswordHash
    package let username = "dav-user-\(UUID().uuidString.prefix(6).lowercased())"
    /// Changed only by `changePassword()`.
    package private(set) var password = "webdav-\(UUID().uuidString.prefix(8))"
    /// The account's collection.
    package var url: URL {
        URL(string: "\(tls ? "https" : "http")://127.0.0.1:\(port)/dav/account/")!
    }
    /// The throwaway certificate authority that signed the server's certificate (TLS only).
    package var caFile: URL { root.appendingPathComponent("ca.pem") }
    /// A client for the account, as a device would make it.
    package func cloud(timeout: TimeInterval = 10, attempts: Int = 3) throws -> WebDAVCloud {
        try WebDAVCloud(
            url: url, username: username, password: password, timeout: timeout,
            caFile: tls ? caFile.path : nil, attempts: attempts)
    }
    /// Apache's document root; the account's collection is `dav/account` in it (what the sweep
    /// looks at).
    package var documentRoot: URL { root.appendingPathComponent("htdocs") }

    /// What the server logged of its errors so far (empty when nothing).
    package var errorLog: String {
        (try? String(contentsOf: root.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
    }

    /// Every request the server has answered so far, as "METHOD STATUS" (its access log).
    package var answered: [String] {
        let log = try? String(
            contentsOf: root.appendingPathComponent("access.log"), encoding: .utf8)
        return log?.split(separator: "\n").map(String.init) ?? []
    }

    /// Waits until the server has answered a request as `line` ("METHOD STATUS") at least
    /// `count` times, or `seconds` passed; says whether it had.
    package func waitUntilAnswered(_ line: String, count: Int = 1, seconds: Double = 30) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while answered.filter({ $0 == line }).count < count {
            guard ContinuousClock.now < deadline else { return false }
            usleep(10_000)
        }
        return true
    }

    /// Starts one (a few tries, each on another random port: one may be taken).
    /// `lockSeconds`: how long nginx grants a lock, whatever is asked (its zone's timeout).
    /// `proxy` (Apache): also a TLS reverse proxy to that loopback address under `/proxied/`
    /// (mod_proxy: how docs/running.md puts `keepsake-escrow` behind TLS).
    package static func start(
        _ kind: Server = .apache, tls: Bool = false, swept: Bool = true,
        passwordHash: PasswordHash = .bcrypt, lockSeconds: Int = 10, proxy: URL? = nil
    ) throws -> PrivateWebDAV {
        try HarnessError.retrying(
            {
                let server = try PrivateWebDAV(
                    kind, tls: tls, swept: swept, passwordHash: passwordHash,
                    lockSeconds: lockSeconds, proxy: proxy)
                do {
                    try server.run()
                    return server
                } catch {
                    server.stop()
                    throw error
                }
            }, afterFailure: {})
    }

    private let lockSeconds: Int
    private let proxy: URL?
    /// Where `proxy` is reached through this server.
    package var proxied: URL {
        URL(string: "\(tls ? "https" : "http")://127.0.0.1:\(port)/proxied/")!
    }

    private init(
        _ server: Server, tls: Bool, swept: Bool, passwordHash: PasswordHash, lockSeconds: Int,
        proxy: URL?
    ) throws {
        self.server = server
        self.lockSeconds = lockSeconds
        self.proxy = proxy
        self.tls = tls
        self.swept = swept
        self.passwordHash = passwordHash
        // Not under the 0700 throwaway root: Apache's workers run as www-data and must reach it.
        root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "keepsake-webdav-\(UUID().uuidString.prefix(8).lowercased())")
        try FileManager.default.createDirectory(
            at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        Registry.shared.removeAtExit(root)
        port = Int(Loopback.randomServerPort())
    }

    private func run() throws {
        try FileManager.default.createDirectory(
            at: documentRoot.appendingPathComponent("dav/account"),
            withIntermediateDirectories: true)
        if tls { try makeCertificates() }
        switch server {
        case .apache: try runApache()
        case .nginx, .nginxWithoutLocks: try runNginx()
        case .rclone: try launch()
        case .wsgidav: try runWsgidav()
        }
    }

    /// Gives the server's user a new password, as its administrator would (the server restarted
    /// where it reads the password only at start): every client still holding the old one is
    /// refused from now on.
    package func changePassword() throws {
        let fresh = "changed-\(UUID().uuidString.prefix(8))"
        switch server {
        case .apache, .nginx, .nginxWithoutLocks:
            password = fresh
            try tool(
                "/usr/bin/htpasswd",
                ["-b"] + (server == .apache && passwordHash == .bcrypt ? ["-B"] : ["-m"])
                    + [root.appendingPathComponent("htpasswd").path, username, password])
        case .rclone, .wsgidav:
            kill()
            password = fresh
            if server == .wsgidav { try writeWsgidavConfiguration() }
            try relaunch()
        }
    }

    private func runWsgidav() throws {
        try writeWsgidavConfiguration()
        try launch()
    }

    /// wsgidav's configuration: basic authentication of one user, its lock and property managers
    /// in memory, the document root as the file system provider, TLS through cheroot.
    private func writeWsgidavConfiguration() throws {
        let ssl =
            tls
            ? "ssl_certificate: \(root.path)/server.pem\nssl_private_key: \(root.path)/server.key"
            : ""
        try """
        host: 127.0.0.1
        port: \(port)
        server: cheroot
        \(ssl)
        provider_mapping:
          "/": \(documentRoot.path)
        http_authenticator:
          accept_basic: true
          accept_digest: false
          default_to_digest: false
        simple_dc:
          user_mapping:
            "*":
              "\(username)":
                password: "\(password)"
        lock_storage: true
        property_manager: true
        verbose: 1
        dir_browser:
          enable: false
        """.write(
            to: root.appendingPathComponent("wsgidav.yaml"), atomically: true, encoding: .utf8)
    }

    /// nginx's configuration: the dav module (PUT, DELETE, MKCOL) and dav-ext (PROPFIND, OPTIONS,
    /// and LOCK / UNLOCK unless `.nginxWithoutLocks`), one process (`master_process off`: the
    /// harness's SIGKILL takes all of it), everything under `root`.
    private func runNginx() throws {
        let htpasswd = root.appendingPathComponent("htpasswd")
        // nginx checks crypt(3) formats: Apache's MD5 (`htpasswd -m`) is one.
        try tool("/usr/bin/htpasswd", ["-b", "-c", "-m", htpasswd.path, username, password])
        let locks = server == .nginx
        let ssl =
            tls
            ? "ssl;\n    ssl_certificate \(root.path)/server.pem;\n    ssl_certificate_key \(root.path)/server.key;"
            : ";"
        try """
        load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
        daemon off;
        master_process off;
        pid \(root.path)/nginx.pid;
        error_log \(root.path)/error.log;
        events {}
        http {
          log_format method_and_status '$request_method $status';
          access_log \(root.path)/access.log method_and_status;
          client_body_temp_path \(root.path)/tmp;
          proxy_temp_path \(root.path)/tmp;
          fastcgi_temp_path \(root.path)/tmp;
          uwsgi_temp_path \(root.path)/tmp;
          scgi_temp_path \(root.path)/tmp;
          \(locks ? "dav_ext_lock_zone zone=keepsake:1m timeout=\(lockSeconds)s;" : "")
          server {
            listen 127.0.0.1:\(port) \(ssl)
            root \(documentRoot.path);
            location / {
              auth_basic keepsake;
              auth_basic_user_file \(htpasswd.path);
              dav_methods PUT DELETE MKCOL;
              dav_ext_methods PROPFIND OPTIONS\(locks ? " LOCK UNLOCK" : "");
              \(locks ? "dav_ext_lock zone=keepsake;" : "")
              client_max_body_size 1m;
            }
          }
        }
        """.write(to: root.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("tmp"), withIntermediateDirectories: true)
        try launch()
    }

    private func runApache() throws {
        let htpasswd = root.appendingPathComponent("htpasswd")
        try tool(
            "/usr/bin/htpasswd",
            ["-b", "-c"] + (passwordHash == .bcrypt ? ["-B"] : ["-m"])
                + [htpasswd.path, username, password])
        let conf = root.appendingPathComponent("httpd.conf")
        var ssl = ""
        if tls {
            ssl = """
                LoadModule ssl_module modules/mod_ssl.so
                SSLSessionCache none
                SSLEngine on
                SSLCertificateFile \(root.path)/server.pem
                SSLCertificateKeyFile \(root.path)/server.key
                """
        }
        try """
        ServerRoot /usr/lib/apache2
        ServerName 127.0.0.1
        LoadModule mpm_event_module modules/mod_mpm_event.so
        # Small: a test's few requests need few threads, and every thread takes a pid (32768 here,
        # shared by every test running beside it). Apache's own default is 3 × 25.
        StartServers 1
        ServerLimit 2
        ThreadsPerChild 8
        ThreadLimit 8
        MinSpareThreads 1
        MaxSpareThreads 16
        MaxRequestWorkers 16
        LoadModule authz_core_module modules/mod_authz_core.so
        LoadModule authn_core_module modules/mod_authn_core.so
        LoadModule authn_file_module modules/mod_authn_file.so
        LoadModule auth_basic_module modules/mod_auth_basic.so
        LoadModule authz_user_module modules/mod_authz_user.so
        LoadModule dav_module modules/mod_dav.so
        LoadModule dav_fs_module modules/mod_dav_fs.so
        \(ssl)
        Listen 127.0.0.1:\(port)
        PidFile \(root.path)/httpd.pid
        ErrorLog \(root.path)/error.log
        LogFormat "%m %>s" method-and-status
        CustomLog \(root.path)/access.log method-and-status
        User www-data
        Group www-data
        DocumentRoot \(documentRoot.path)
        DavLockDB \(root.path)/davlock
        \(proxy.map { "LoadModule proxy_module modules/mod_proxy.so\nLoadModule proxy_http_module modules/mod_proxy_http.so\nProxyPass /proxied/ \($0.absoluteString)\nProxyPassReverse /proxied/ \($0.absoluteString)" } ?? "")
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
        try launch()
    }

    /// The server's command line, in the foreground.
    private var command: String {
        switch server {
        case .apache:
            return "exec /usr/sbin/apache2 -f \(root.path)/httpd.conf -DFOREGROUND"
        case .nginx, .nginxWithoutLocks:
            return
                "exec /usr/sbin/nginx -p \(root.path) -e \(root.path)/error.log -c \(root.path)/nginx.conf"
        case .rclone:
            let tlsOptions =
                tls ? " --cert \(root.path)/server.pem --key \(root.path)/server.key" : ""
            return
                "exec /usr/bin/rclone serve webdav \(documentRoot.path) --addr 127.0.0.1:\(port) --user \(username) --pass \(password)\(tlsOptions) --config \(root.path)/rclone.conf --log-file \(root.path)/error.log"
        case .wsgidav:
            return
                "exec /usr/bin/python3 -c 'from wsgidav.server.server_cli import run; run()' --config \(root.path)/wsgidav.yaml"
        }
    }

    /// Starts the server on the prepared configuration and waits until it answers.
    private func launch() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["APACHE_RUN_DIR"] = root.path
        environment["APACHE_LOCK_DIR"] = root.path
        environment["APACHE_LOG_DIR"] = root.path
        environment["PYTHONPATH"] = Server.wsgidavLibrary.path
        // In the foreground under the harness's guard: gone when the test process is.
        daemon = try Daemon(command, environment: environment)
        let deadline = Date().addingTimeInterval(15)
        let probe = try WebDAVCloud(
            url: url.deletingLastPathComponent(), username: username, password: password,
            timeout: 2, caFile: tls ? caFile.path : nil, attempts: 1)
        // Up when it serves a file of its own: another server that holds the port (this one then
        // could not bind it) must not pass for it — an escrow node answered a PROPFIND there
        // with a 404, which lists as empty.
        let token = Data(UUID().uuidString.utf8)
        let tokenName = "probe-\(UUID().uuidString.prefix(8).lowercased())"
        let tokenFile = documentRoot.appendingPathComponent("dav/\(tokenName)")
        try token.write(to: tokenFile)
        chmod(tokenFile.path, 0o644)  // Apache's workers run as www-data
        defer { try? FileManager.default.removeItem(at: tokenFile) }
        while (try? probe.read(tokenName)) != token {
            // Gone already (its port taken, say): no use waiting out the deadline.
            if Date() > deadline || !(daemon?.isAlive ?? false) {
                throw HarnessError(
                    "\(server) did not come up on port \(port): \(errorLog.suffix(600))")
            }
            usleep(50_000)
        }
    }

    /// A throwaway CA (valid two days) and a certificate it signs for 127.0.0.1 / localhost.
    private func makeCertificates() throws {
        let openssl = "/usr/bin/openssl"
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try tool(
            openssl,
            ["req", "-x509"] + ec + [
                "-keyout", "\(root.path)/ca.key", "-out", caFile.path, "-days", "2", "-subj",
                "/CN=Keepsake throwaway test CA",
            ])
        try tool(
            openssl,
            ["req"] + ec + [
                "-keyout", "\(root.path)/server.key", "-out", "\(root.path)/server.csr", "-subj",
                "/CN=127.0.0.1",
            ])
        let extensions = root.appendingPathComponent("server.ext")
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n".write(
            to: extensions, atomically: true, encoding: .utf8)
        try tool(
            openssl,
            [
                "x509", "-req", "-in", "\(root.path)/server.csr", "-CA", caFile.path, "-CAkey",
                "\(root.path)/ca.key", "-CAcreateserial", "-out", "\(root.path)/server.pem",
                "-days", "2", "-extfile", extensions.path,
            ])
    }

    /// Stops httpd, keeping its files and port: the server is down until `relaunch()`.
    package func kill() {
        daemon?.stop()
        daemon = nil
        // Its workers would serve a while longer on the inherited socket: down means refusing.
        _ = Self.pkillWorkers(root)
        let probe = try? cloud(timeout: 0.5, attempts: 1)
        let deadline = Date().addingTimeInterval(10)
        while (try? probe?.list()) != nil, Date() < deadline { usleep(50_000) }
    }

    /// Apache workers still running on this server's configuration (none once the parent's gone
    /// and they noticed): killed.
    private static func pkillWorkers(_ root: URL) -> Int32 {
        (try? Spawn.run(
            "/usr/bin/pkill", ["-9", "-f", "apache2 -f \(root.path)/httpd.conf"],
            environment: ProcessInfo.processInfo.environment)) ?? 1
    }

    /// Starts httpd again after `kill()`, with everything it held (a few tries: the old one may
    /// still hold the port for a moment).
    package func relaunch() throws {
        try HarnessError.retrying(launch) {
            kill()
            Thread.sleep(forTimeInterval: 1)
        }
    }

    /// Stops httpd and removes its files (the document root kept for the suite-wide sweep).
    package func stop() {
        daemon?.stop()
        daemon = nil
        if swept, let untrusted = SuiteSweep.untrustedRoot,
            FileManager.default.fileExists(atPath: documentRoot.path)
        {
            let copy = untrusted.appendingPathComponent(root.lastPathComponent)
            try? FileManager.default.createDirectory(
                at: untrusted, withIntermediateDirectories: true)
            try? FileManager.default.copyItem(at: documentRoot, to: copy)
        }
        // Its worker children do not all exit with the parent (hundreds were found alive hours
        // after the runs that started them, ~25 threads each): killed.
        _ = Self.pkillWorkers(root)
        try? FileManager.default.removeItem(at: root)
    }

    deinit { stop() }

    /// Runs an Apache tool to its end (httpd starting daemonizes: its parent exits, the server
    /// stays) — with posix_spawn and waitpid (`Spawn`): Foundation's Process once waited for good
    /// on such a parent after it had exited.
    private func tool(_ path: String, _ arguments: [String]) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["APACHE_RUN_DIR"] = root.path
        environment["APACHE_LOCK_DIR"] = root.path
        environment["APACHE_LOG_DIR"] = root.path
        guard try Spawn.run(path, arguments, environment: environment) == 0 else {
            throw HarnessError("\(path) \(arguments.first ?? "") failed (apt-get install apache2)")
        }
    }
}
