internal import CKeepsakeHTTP
import Foundation

/// One HTTP exchange through libcurl (`CKeepsakeHTTP`), its limits set there.
package enum HTTP {
    /// What a server answered: the status, the body (within its limit) and the headers used.
    package struct Response {
        package var status: Int
        package var body: Data
        package var etag: String?
        package var lastModified: Date?
        package var lockToken: String?
        package var dav: String?
    }

    /// A reused libcurl handle (`keepsake_http_client`), freed with its last reference.
    package final class Client: @unchecked Sendable {
        // Sendable: the C side serializes every use with its own mutex.
        package let pointer: OpaquePointer?
        package init() { pointer = keepsake_http_client_new() }
        deinit { keepsake_http_client_free(pointer) }
    }

    package struct Failure: Error {
        package var message: String
        package var isTooLarge: Bool
    }

    package static func exchange(
        _ method: String, _ target: URL, on client: Client,
        credentials: (user: String, password: String)?,
        headers: [String: String], body: Data?, limit: Int, timeout: TimeInterval,
        caFile: String?
    ) throws -> Response {
        var out = keepsake_http_response()
        let lines = headers.map { "\($0.key): \($0.value)" }
        let code: Int32 = withCStrings(lines) { headerPointers in
            (body ?? Data()).withUnsafeBytes { bytes in
                keepsake_http_request(
                    client.pointer, method, target.absoluteString, credentials?.user,
                    credentials?.password,
                    headerPointers, lines.count,
                    body == nil ? nil : (bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)),
                    bytes.count, limit, Int(timeout * 1000), caFile, &out)
            }
        }
        defer { keepsake_http_free(&out) }
        let error = withUnsafeBytes(of: out.error) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard code == 0 else {
            throw Failure(message: error, isTooLarge: code == KEEPSAKE_HTTP_TOO_LARGE)
        }
        let data = out.body.map { Data(bytes: $0, count: out.length) } ?? Data()
        let etag = withUnsafeBytes(of: out.etag) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        let modified = withUnsafeBytes(of: out.last_modified) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        let lockToken = withUnsafeBytes(of: out.lock_token) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        let dav = withUnsafeBytes(of: out.dav) {
            String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
        }
        return Response(
            status: out.status, body: data, etag: etag.isEmpty ? nil : etag,
            lastModified: httpDate(modified), lockToken: lockToken.isEmpty ? nil : lockToken,
            dav: dav.isEmpty ? nil : dav)
    }

    private static func httpDate(_ text: String) -> Date? {
        guard !text.isEmpty else { return nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }

    /// Runs `body` with `strings` as an array of C strings.
    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
    ) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer($0) }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
    }
}
