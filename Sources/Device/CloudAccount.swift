import Foundation
import Sealing

/// Storage for a cloud account: untrusted, shared by the user's devices, possibly synced by any
/// file-sync engine. Everything written to it is sealed and named by keyed hashes; a backend only
/// moves opaque blobs.
public protocol CloudStorage: Sendable {
    func read(_ name: String) throws -> Data?
    func write(_ name: String, _ data: Data) throws
    func delete(_ name: String) throws
    func list() throws -> [String]
}

/// The cloud account as a directory (the only backend so far; WebDAV or object storage would
/// implement `CloudStorage` the same way). Writes are atomic; names are validated so none can
/// escape the directory.
public struct CloudDirectory: CloudStorage {
    public let url: URL
    public init(_ url: URL) { self.url = url }

    private func file(_ name: String) throws -> URL {
        guard !name.isEmpty, name.utf8.count <= 200,
            name.unicodeScalars.allSatisfy({
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_")
            })
        else { throw CloudError("invalid cloud object name") }
        return url.appendingPathComponent(name)
    }

    public func read(_ name: String) throws -> Data? { try Files.read(try file(name)) }
    public func write(_ name: String, _ data: Data) throws {
        try Files.writeAtomically(data, to: try file(name))
    }
    public func delete(_ name: String) throws { try Files.remove(try file(name)) }
    public func list() throws -> [String] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        return Files.list(url)
    }
}

public struct CloudError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension AccountKeyBlob {
    static func decode(_ bytes: Data) throws(DeviceError) -> AccountKeyBlob {
        guard let blob = parse(bytes) else {
            throw DeviceError(.corrupt, "the cloud account key does not decode")
        }
        return blob
    }
}
