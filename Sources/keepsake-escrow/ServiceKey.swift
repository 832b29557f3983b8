import Foundation
import Platform
import Sealing
import TPM

/// The service key every row of a PostgreSQL store is sealed under (`--service-key FILE`, the
/// same on every node): in the file itself (32 raw bytes, or 64 hex digits), or sealed to this
/// node's TPM (`--service-key-tpm TCTI`, a file `keepsake-escrow seal-service-key` wrote). A
/// sealed file holds the key under a state key that only that TPM releases — an NV index read
/// through a session salted to the TPM's storage key, as the file store's state key
/// (`TPMServiceState`) — so a copy of the node's disk, or the file alone, holds no service key.
enum ServiceKey {
    /// What `seal-service-key` writes: where the TPM keeps the state key (no secret), and the
    /// service key sealed under it.
    struct Sealed: Codable {
        var format: String
        var handles: TPMServiceState.Handles
        var sealed: Data
    }

    static let format = "keepsake-escrow service key sealed to a TPM, 1"
    /// Bound to every sealed service key: the envelope opens as nothing else.
    private static let associatedData = Data("keepsake-escrow service key".utf8)
    /// A key file is small: a sealed one a few hundred bytes.
    static let maximumFile = 4096

    /// The key in the file at `path`: a plain key, or with `tpm` one sealed to the TPM at that
    /// TCTI (a sealed file without it is refused, saying so).
    static func load(_ path: String, tpm: String?) throws(ServiceKeyError) -> SecureBytes {
        let bytes = try read(path)
        if let tpm { return try open(bytes, tcti: tpm) }
        if let key = plain(bytes) { return key }
        if isSealed(bytes) {
            throw ServiceKeyError(
                "\(path) is sealed to a TPM already: it opens with --service-key-tpm TCTI")
        }
        throw ServiceKeyError("\(path) holds 32 bytes, or 64 hex digits")
    }

    /// The bytes of the key file at `path`: this user's regular file, readable by it alone.
    private static func read(_ path: String) throws(ServiceKeyError) -> Data {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            throw ServiceKeyError("\(path) is not a file")
        }
        guard info.st_uid == geteuid(), info.st_mode & 0o077 == 0 else {
            throw ServiceKeyError(
                "\(path) must be this user's and readable by it alone (chmod 600)")
        }
        guard let bytes = try? Files.read(URL(fileURLWithPath: path), limit: maximumFile) else {
            throw ServiceKeyError("\(path) cannot be read (at most \(maximumFile) bytes)")
        }
        return bytes
    }

    /// The key a plain key file holds: 32 raw bytes, or 64 hex digits (white space around them).
    private static func plain(_ bytes: Data) -> SecureBytes? {
        if bytes.count == Envelope.keyLength { return SecureBytes(copying: bytes) }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
        guard let decoded = Data(hexString: text), decoded.count == Envelope.keyLength else {
            return nil
        }
        return SecureBytes(copying: decoded)
    }

    /// Whether `bytes` are a sealed key file (which then needs its TPM).
    private static func isSealed(_ bytes: Data) -> Bool {
        (try? JSONDecoder().decode(Sealed.self, from: bytes))?.format == format
    }

    /// `key` sealed to the TPM at `tcti`: a new state key in its NV (`TPMServiceState`), the key
    /// sealed under it. The file's bytes.
    static func seal(_ key: SecureBytes, tcti: String) throws(ServiceKeyError) -> Data {
        do {
            let state = try TPMServiceState(tcti: tcti, handles: nil)
            let stateKey = try state.stateKey()
            let sealed = key.withUnsafeBytes {
                Envelope.seal($0, key: stateKey, associatedData: associatedData)
            }
            return try JSONEncoder().encode(
                Sealed(format: format, handles: state.handles, sealed: sealed))
        } catch let error as TPMError {
            throw ServiceKeyError("the TPM at \(tcti): \(error.message)")
        } catch {
            throw ServiceKeyError("\(error)")
        }
    }

    /// The key a sealed file's `bytes` hold, released by the TPM at `tcti`: refused on another
    /// TPM (its storage key differs), or when the file was changed.
    private static func open(_ bytes: Data, tcti: String) throws(ServiceKeyError) -> SecureBytes {
        guard let file = try? JSONDecoder().decode(Sealed.self, from: bytes),
            file.format == format
        else {
            throw ServiceKeyError(
                "it is not a key sealed to a TPM (keepsake-escrow seal-service-key writes one)")
        }
        do {
            let state = try TPMServiceState(tcti: tcti, handles: file.handles)
            let key = try Envelope.open(
                file.sealed, key: try state.stateKey(), associatedData: associatedData)
            guard key.count == Envelope.keyLength else {
                throw ServiceKeyError("the sealed key is not 32 bytes")
            }
            return key
        } catch let error as ServiceKeyError {
            throw error
        } catch let error as TPMError {
            throw ServiceKeyError("the TPM at \(tcti): \(error.message)")
        } catch {
            throw ServiceKeyError("it does not open under the TPM's key (changed, or another's)")
        }
    }
}

/// Why a service key could not be had; said after the option's name.
struct ServiceKeyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
