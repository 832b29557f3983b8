import Foundation
import Platform

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// An app's Auto Backup configuration: `android:allowBackup` and its rules, from a
/// `full-backup-content` document (the same rules for cloud backup and device transfer) or a
/// `data-extraction-rules` document (`<cloud-backup>` and `<device-transfer>` sections).
///
/// Rules: when any include is present, only included files are taken (include-only mode); an
/// exclude always wins; `path="."` is the whole domain, a directory takes everything under it; no
/// wildcards, no `..`, no absolute paths. `requireFlags="clientSideEncryption"` takes a file to the
/// cloud only when the device is end-to-end-encryption capable, `deviceToDeviceTransfer` only in a
/// transfer. `disableIfNoEncryptionCapabilities="true"` on `<cloud-backup>` turns cloud backup off
/// without E2EE.
public struct BackupConfiguration: Sendable, Equatable {
    /// `android:allowBackup`: when false, neither a backup nor a transfer takes anything.
    public var allowBackup: Bool
    /// The rules for cloud backup (`<cloud-backup>`, or the whole `full-backup-content`).
    public var cloud: RuleSet
    /// The rules for device-to-device transfer (`<device-transfer>`, or the whole
    /// `full-backup-content`).
    public var deviceTransfer: RuleSet

    /// Backup allowed and no rules: every file of the container, for backup and transfer alike.
    public static let everything = BackupConfiguration(
        allowBackup: true, cloud: RuleSet(), deviceTransfer: RuleSet())

    /// One section's rules: its includes, its excludes and its encryption condition.
    public struct RuleSet: Sendable, Equatable {
        /// The `<include>` rules; when there is any, only the files they name are taken.
        public var includes: [Rule] = []
        /// The `<exclude>` rules; an exclude wins over every include.
        public var excludes: [Rule] = []
        /// `disableIfNoEncryptionCapabilities="true"` on `<cloud-backup>`: no cloud backup at all
        /// without end-to-end encryption.
        public var disableIfNoEncryptionCapabilities = false
    }

    /// One `<include>` or `<exclude>`: a domain, a path in it, and its `requireFlags`.
    public struct Rule: Sendable, Equatable {
        /// The `domain` attribute: which directory of the container `path` is in.
        public var domain: Domain
        /// The `path` attribute, relative to the domain's directory: `.` is the whole domain, a
        /// directory takes everything under it (a trailing `/` is dropped).
        public var path: String
        /// `requireFlags="clientSideEncryption"`: an include that takes its files to the cloud
        /// only with end-to-end encryption.
        public var requireClientSideEncryption = false
        /// `requireFlags="deviceToDeviceTransfer"`: an include that takes its files in a
        /// device-to-device transfer only.
        public var requireDeviceTransfer = false
    }

    /// Android's backup domains (the `domain` attribute), each a directory of the container.
    public enum Domain: String, Sendable, CaseIterable {
        /// `root`: the container itself; `file`: `files`; `database`: `databases`;
        /// `sharedpref`: `shared_prefs`; `external`: external storage, which Keepsake's apps do
        /// not have (its rules match nothing).
        case root, file, database, sharedpref, external
        /// `device_root`: the device-protected storage, `device` in the container.
        case deviceRoot = "device_root"
        /// `device_file`: `device/files`.
        case deviceFile = "device_file"
        /// `device_database`: `device/databases`.
        case deviceDatabase = "device_database"
        /// `device_sharedpref`: `device/shared_prefs`.
        case deviceSharedpref = "device_sharedpref"

        /// The domain's directory inside the container, relative ("" = the container); nil for
        /// external storage, which Keepsake's apps do not have.
        var directory: String? {
            switch self {
            case .root: ""
            case .file: "files"
            case .database: "databases"
            case .sharedpref: "shared_prefs"
            case .external: nil
            case .deviceRoot: "device"
            case .deviceFile: "device/files"
            case .deviceDatabase: "device/databases"
            case .deviceSharedpref: "device/shared_prefs"
            }
        }
    }

    /// Parses either document kind.
    public static func parse(_ xml: Data, allowBackup: Bool = true) throws(PreferencesError)
        -> BackupConfiguration
    {
        try XMLInput.check(xml, "backup rules")
        // Well-formedness first (the root element must close), so a broken document is named as
        // such rather than by whatever partial element the parser saw before giving up.
        let checker = RootChecker()
        let check = XMLParser(data: xml)
        check.delegate = checker
        guard check.parse(), checker.closed else {
            throw PreferencesError(.invalidInput, "backup rules: not well-formed XML")
        }
        let delegate = RuleParser()
        let parser = XMLParser(data: xml)
        parser.delegate = delegate
        let ok = parser.parse()
        if let error = delegate.error {
            throw PreferencesError(.invalidInput, "backup rules: \(error)")
        }
        guard ok else { throw PreferencesError(.invalidInput, "backup rules: not well-formed XML") }
        guard let root = delegate.root else {
            throw PreferencesError(.invalidInput, "backup rules: empty document (XML)")
        }
        var configuration = BackupConfiguration(
            allowBackup: allowBackup, cloud: RuleSet(), deviceTransfer: RuleSet())
        if root == "full-backup-content" {
            configuration.cloud = delegate.sets[""] ?? RuleSet()
            configuration.deviceTransfer = delegate.sets[""] ?? RuleSet()
        } else {
            configuration.cloud = delegate.sets["cloud-backup"] ?? RuleSet()
            configuration.deviceTransfer = delegate.sets["device-transfer"] ?? RuleSet()
        }
        return configuration
    }

    /// The container-relative paths of `files` that a backup takes.
    public func select(_ files: [String], forTransfer: Bool, endToEndEncryption: Bool) -> [String] {
        guard allowBackup else { return [] }
        let set = forTransfer ? deviceTransfer : cloud
        if !forTransfer && set.disableIfNoEncryptionCapabilities && !endToEndEncryption {
            return []
        }
        // A device-to-device transfer satisfies both flags; a cloud backup only
        // clientSideEncryption, and only with E2EE.
        func applies(_ rule: Rule) -> Bool {
            if forTransfer { return true }
            if rule.requireDeviceTransfer { return false }
            return !rule.requireClientSideEncryption || endToEndEncryption
        }
        func matches(_ rule: Rule, _ file: String) -> Bool {
            guard let directory = rule.domain.directory else { return false }
            let base = directory.isEmpty ? "" : directory + "/"
            if rule.path == "." { return directory.isEmpty || file.hasPrefix(base) }
            let target = base + rule.path
            return file == target || file.hasPrefix(target + "/")
        }
        let includes = set.includes.filter(applies)
        return files.filter { file in
            let inInclude = set.includes.isEmpty || includes.contains { matches($0, file) }
            let excluded = set.excludes.contains { matches($0, file) }
            return inInclude && !excluded
        }.sorted()
    }

    private final class RootChecker: NSObject, XMLParserDelegate {
        var depth = 0
        var closed = false
        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
            qualifiedName: String?, attributes: [String: String] = [:]
        ) {
            depth += 1
        }
        func parser(
            _ parser: XMLParser, didEndElement element: String, namespaceURI: String?,
            qualifiedName: String?
        ) {
            depth -= 1
            if depth == 0 { closed = true }
        }
    }

    private final class RuleParser: NSObject, XMLParserDelegate {
        var root: String?
        var section = ""
        var sets: [String: RuleSet] = [:]
        var error: String?

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
            qualifiedName: String?, attributes: [String: String] = [:]
        ) {
            guard error == nil else { return }
            if root == nil {
                guard element == "full-backup-content" || element == "data-extraction-rules" else {
                    error = "the root element must be full-backup-content or data-extraction-rules"
                    return parser.abortParsing()
                }
                root = element
                if element == "full-backup-content" { sets[""] = RuleSet() }
                return
            }
            switch element {
            case "cloud-backup",
                "device-transfer" where root == "data-extraction-rules":
                section = element
                var set = RuleSet()
                set.disableIfNoEncryptionCapabilities =
                    attributes["disableIfNoEncryptionCapabilities"] == "true"
                sets[element] = set
            case "include", "exclude":
                do {
                    let rule = try Self.rule(attributes)
                    if element == "include" {
                        sets[section, default: RuleSet()].includes.append(rule)
                    } else {
                        sets[section, default: RuleSet()].excludes.append(rule)
                    }
                } catch {
                    self.error = error.description
                    parser.abortParsing()
                }
            default:
                error = "unknown element \(element)"
                parser.abortParsing()
            }
        }

        func parser(
            _ parser: XMLParser, didEndElement element: String, namespaceURI: String?,
            qualifiedName: String?
        ) {
            if element == "cloud-backup" || element == "device-transfer" { section = "" }
        }

        static func rule(_ attributes: [String: String]) throws(PreferencesError) -> Rule {
            guard let domainName = attributes["domain"], let domain = Domain(rawValue: domainName)
            else {
                throw PreferencesError(.invalidInput, "unknown or missing domain")
            }
            guard let path = attributes["path"], !path.isEmpty else {
                throw PreferencesError(.invalidInput, "missing path")
            }
            if path.contains("*") || path.contains("?") {
                throw PreferencesError(.invalidInput, "wildcard in path \(path)")
            }
            if path.hasPrefix("/") {
                throw PreferencesError(.invalidInput, "absolute path \(path)")
            }
            if path.split(separator: "/").contains("..") {
                throw PreferencesError(.invalidInput, "'..' in path \(path)")
            }
            var rule = Rule(
                domain: domain, path: path.hasSuffix("/") ? String(path.dropLast()) : path)
            if let flags = attributes["requireFlags"] {
                for flag in flags.split(separator: "|").map({
                    $0.trimmingCharacters(in: .whitespaces)
                }) {
                    switch flag {
                    case "clientSideEncryption": rule.requireClientSideEncryption = true
                    case "deviceToDeviceTransfer": rule.requireDeviceTransfer = true
                    default:
                        throw PreferencesError(.invalidInput, "unknown requireFlags value \(flag)")
                    }
                }
            }
            return rule
        }
    }
}
