// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Keepsake",
    platforms: [.macOS(.v13)],
    // The products are what README's "Public API" section documents; everything shared between
    // our own modules is `package`.
    products: [
        // The device model: apps, the lock screen and its passcode, settings, the cloud account;
        // the Secret Service connection the stores run on, owned key memory (Sealing) and the
        // shape of every error (Platform).
        .library(
            name: "Device",
            targets: ["Device", "CloudAccount", "SecretService", "Sealing", "Platform"]),
        .library(name: "Keychain", targets: ["Keychain"]),
        .library(name: "Security", targets: ["Security"]),
        .library(name: "LocalAuthentication", targets: ["LocalAuthentication"]),
        .library(name: "BlockStore", targets: ["BlockStore"]),
        .library(name: "KeyValueStore", targets: ["KeyValueStore"]),
        .library(name: "Preferences", targets: ["Preferences"]),
        .library(name: "RecoveryHint", targets: ["RecoveryHint"]),
        // Keepsake from C (include/keepsake.h, docs/c-abi.md): libKeepsakeC.so.
        .library(name: "KeepsakeC", type: .dynamic, targets: ["KeepsakeC"]),
        .executable(name: "keepsake", targets: ["keepsake"]),
        .executable(name: "keepsake-escrow", targets: ["keepsake-escrow"]),
    ],
    targets: [
        // C stays below this line: system libraries (libsodium, libkeyutils; CSecret for tests)
        // and small shim targets.
        // The shims (CKeepsakeShims) call libsecret, GIO, GObject, GLib and libdbus only through
        // a table they fill when the first connection opens (CKeepsakeShims/loader.c), and take
        // their headers through links to what libsecret-1-dev, libglib2.0-dev and libdbus-1-dev
        // install (CKeepsakeShims/include/libsecret, CKeepsakeShims/system) and the multiarch
        // configuration headers (system/multiarch.h). Nothing of them is linked into the
        // products, so a command that never reaches the Secret Service (`--help`, a usage error)
        // loads none of them. CSecret (GObject and GLib by pkg-config; libsecret-1's own adds
        // -pthread, which SwiftPM strips with a warning) is for the test support's libsecret
        // baseline and the impostor service only.
        .systemLibrary(
            name: "CSecret", pkgConfig: "gobject-2.0",
            providers: [.apt(["libsecret-1-dev"])]),
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "CKeyutils", pkgConfig: "libkeyutils", providers: [.apt(["libkeyutils-dev"])]),
        // PostgreSQL's client library: the escrow's shared store (keepsake-escrow --store).
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl's variadic setopt behind one bounded request function (WebDAV); libcurl is
        // loaded at the first request (dlopen), so a process that never uses a cloud never
        // loads it. Its headers come from libcurl4-openssl-dev.
        .target(name: "CKeepsakeHTTP", dependencies: ["CKeepsakeLoader"]),
        // How the three shims above and below load a C library when first used (dlopen): once.
        .target(name: "CKeepsakeLoader"),
        .target(
            name: "CKeepsakeShims", dependencies: ["CKeepsakeLoader"], exclude: ["system"],
            cSettings: [
                .headerSearchPath("system/glib-2.0"), .headerSearchPath("system/dbus-1.0"),
                .headerSearchPath("system/multiarch"),
            ]),
        // Tests only: an impostor of the Secret Service answering with replies of the wrong type.
        .target(
            name: "CRogueSecretService", dependencies: ["CSecret"],
            linkerSettings: [.linkedLibrary("gio-2.0")]),
        // tpm2-tss ESAPI behind fixed-argument shims; loaded at the first TPM open (dlopen), so a
        // process that never uses a TPM never loads it. Its headers come from libtss2-dev.
        .target(name: "CKeepsakeTPMShims", dependencies: ["CKeepsakeLoader"]),

        // Knows D-Bus and libsecret, nothing about keychains.
        .target(name: "SecretService", dependencies: ["CKeepsakeShims", "Sealing", "Platform"]),
        // The process's plumbing, what Keepsake needs of Linux beyond Foundation: files written
        // atomically and owned by the user, file locks, the kernel keyring, one bounded HTTP
        // exchange (libcurl, loaded when first used), the bounded blocking pool, untrusted XML,
        // hex; and the one shape of every Keepsake error (`KeepsakeError`, `CodedError`).
        .target(name: "Platform", dependencies: ["CKeepsakeHTTP", "CKeyutils"]),
        // Cryptography on libsodium, nothing about storage: owned key memory, envelopes,
        // Argon2id, the OPRF; it takes only the error shape and hex from Platform.
        .target(name: "Sealing", dependencies: ["CSodium", "Platform"]),
        // Knows tpm2-tss ESAPI, nothing about keychains: passcode slots under a guess counter.
        .target(name: "TPM", dependencies: ["CKeepsakeTPMShims", "Sealing", "Platform"]),
        // The escrow's protocol, both sides: an OPRF on ristretto255, a count kept by the escrow,
        // proofs of the passcode that tell a listener nothing. Knows libsodium (via Sealing) and
        // Platform's error shape only.
        .target(name: "Escrow", dependencies: ["Sealing", "Platform"]),
        // The "operating system" the apps run on: app identity, container, directories, the
        // device record, the lock screen, class keys, runtime keys (kernel keyring), and its one
        // error. Its Passcode/ folder holds the passcode: lock-screen kinds and protection
        // classes, the key derivations, and where guesses are counted (the delays, a guess
        // counter service, a direct TPM slot); that folder knows no storage (scripts/check-layers
        // checks it imports no Secret Service and names none of the module's other types): the
        // device record keeps what it returns.
        .target(
            name: "Device",
            dependencies: ["SecretService", "Sealing", "Platform", "TPM", "Escrow"]),
        // The cloud account a device signs in to: its storage (a directory, WebDAV), its objects
        // and their names, the manifest, joins, the escrow client, key rotation, sync status.
        // Told of the device's unlocks; the device never calls it.
        .target(
            name: "CloudAccount",
            dependencies: ["Device", "SecretService", "Sealing", "Platform", "Escrow", "TPM"]),
        // Apple's generic-password semantics, Swift-native API.
        .target(
            name: "Keychain",
            dependencies: ["SecretService", "Device", "CloudAccount", "Platform", "Sealing"]),
        // Google's Block Store: entries sealed in the device directory, cloud copies under E2EE.
        .target(
            name: "BlockStore",
            dependencies: ["Device", "CloudAccount", "Platform", "Sealing", "SecretService"]),
        // Apple's NSUbiquitousKeyValueStore: limits, local cache, synchronize, external changes.
        .target(
            name: "KeyValueStore", dependencies: ["Device", "CloudAccount", "Platform", "Sealing"]),
        // Android's SharedPreferences and Auto Backup (backup rules, restore at reinstall, transfer).
        .target(
            name: "Preferences", dependencies: ["Device", "CloudAccount", "Platform", "Sealing"]),
        // The hint: two stores per profile, dual write, read either, the never-throwing facade.
        .target(
            name: "RecoveryHint",
            dependencies: [
                "Keychain", "BlockStore", "KeyValueStore", "Preferences", "Device", "CloudAccount",
                "Platform",
                "Sealing",
            ]),
        // Apple-source-compatible surface: SecItem*, kSec* constants, CF aliases.
        .target(
            name: "Security",
            dependencies: [
                "Keychain", "Device", "Sealing", "LocalAuthentication", "KeyValueStore",
                "CloudAccount",
            ]),
        // Apple's LocalAuthentication names (LAContext, LAPolicy, LAError), as far as they mean
        // something on Linux. Knows nothing of keychains: it holds the credentials a use of a
        // protected item is given.
        .target(name: "LocalAuthentication", dependencies: ["Sealing", "Platform"]),
        // The private Secret Service harness and throwaway devices (tests, demo, benchmarks).
        .target(
            name: "KeepsakeTestSupport",
            dependencies: [
                "SecretService", "Device", "CloudAccount", "Platform", "Sealing", "TPM", "Escrow",
                "CSecret",
                "CSodium",
            ],
            // libsecret's own calls, the baseline the benchmark and tests compare with (the
            // library modules load libsecret when they first connect: CKeepsakeShims/loader.c).
            linkerSettings: [.linkedLibrary("secret-1"), .linkedLibrary("gio-2.0")]),
        // The app's wiring: what opens an app, its device, its cloud and its stores from typed
        // options; the command line, the C interface and the development tool all build on it.
        .target(
            name: "AppWiring",
            dependencies: [
                "Keychain", "SecretService", "Device", "CloudAccount", "Sealing", "Platform",
            ]),
        // The command line's commands, shared by the shipped `keepsake` and `keepsake-dev`.
        // Knows the library modules, never the test harness.
        .target(
            name: "KeepsakeCLI",
            dependencies: [
                "AppWiring", "Keychain", "Security", "BlockStore", "KeyValueStore", "Preferences",
                "RecoveryHint", "SecretService", "Device", "CloudAccount", "Platform", "Sealing",
                "CKeepsakeShims",
            ]),
        // The shipped command line: the product alone.
        .executableTarget(name: "keepsake", dependencies: ["KeepsakeCLI"]),
        // The escrow service a cloud account's devices join through with a passcode: it owns
        // its state (slots, counts) and answers only `EscrowProtocol`.
        .executableTarget(
            name: "keepsake-escrow",
            dependencies: ["Escrow", "EscrowPostgres", "Platform", "TPM", "Sealing"]),
        // The escrow's shared store: slots and sessions as rows of PostgreSQL, sealed under a
        // service key the database never holds, each request one serializable transaction.
        .target(
            name: "EscrowPostgres", dependencies: ["Escrow", "CLibPQ", "Sealing", "Platform"]),
        // The development tool, not a product: the command line at test speed plus demo, bench
        // and the load-test worker on the private harness. Never shipped.
        .executableTarget(
            name: "keepsake-dev",
            dependencies: [
                "KeepsakeCLI", "AppWiring", "KeepsakeTestSupport", "Keychain", "BlockStore",
                "RecoveryHint",
                "Device", "CloudAccount", "Platform", "Sealing", "SecretService",
            ]),

        // The C ABI over the products: its apps opened by the app's wiring, as the command
        // line's are.
        .target(
            name: "KeepsakeC",
            dependencies: [
                "AppWiring", "CloudAccount", "Device", "Keychain", "BlockStore", "RecoveryHint",
                "Sealing", "Platform",
            ]),
        .testTarget(name: "SealingTests", dependencies: ["Sealing", "KeepsakeTestSupport"]),
        .testTarget(
            name: "PreferencesTests",
            dependencies: [
                "Preferences", "Device", "CloudAccount", "Platform", "KeepsakeTestSupport",
            ]),
        .testTarget(
            name: "KeyValueStoreTests",
            dependencies: [
                "KeyValueStore", "Device", "CloudAccount", "Platform", "KeepsakeTestSupport",
            ]),
        .testTarget(
            name: "RecoveryHintTests",
            dependencies: [
                "RecoveryHint", "Keychain", "BlockStore", "KeyValueStore", "Preferences", "Device",
                "CloudAccount", "Platform",
                "KeepsakeTestSupport", "SecretService", "Sealing", "LocalAuthentication",
            ]),
        .testTarget(
            name: "BlockStoreTests",
            dependencies: [
                "BlockStore", "Device", "CloudAccount", "Platform", "Sealing",
                "KeepsakeTestSupport",
                "SecretService",
            ]),
        .testTarget(
            name: "SecretServiceTests",
            dependencies: [
                "SecretService", "KeepsakeTestSupport", "CRogueSecretService", "CKeepsakeLoader",
            ]),
        .testTarget(
            name: "KeychainTests",
            dependencies: [
                "Keychain", "KeepsakeTestSupport", "SecretService", "Device", "CloudAccount",
                "Platform",
                "Sealing",
            ]),
        .testTarget(
            name: "DeviceTests",
            dependencies: [
                "Device", "CloudAccount", "Platform", "KeepsakeTestSupport",
                "SecretService",
                "Sealing", "TPM",
                "Escrow",
            ]),
        .testTarget(name: "PlatformTests", dependencies: ["Platform", "KeepsakeTestSupport"]),
        .testTarget(name: "LocalAuthenticationTests", dependencies: ["LocalAuthentication"]),
        .testTarget(
            name: "TPMTests",
            dependencies: [
                "Device", "TPM", "Platform", "KeepsakeTestSupport", "SecretService",
                "Sealing",
            ]),
        .testTarget(
            name: "PasscodeTests",
            dependencies: [
                "Device", "Platform", "KeepsakeTestSupport", "SecretService",
                "Sealing", "TPM", "Escrow",
            ]),
        .testTarget(
            name: "CloudAccountTests",
            dependencies: [
                "CloudAccount", "Device", "Platform", "KeepsakeTestSupport",
                "SecretService", "Sealing", "TPM", "Escrow",
            ]),
        .testTarget(
            name: "SecurityTests",
            dependencies: [
                "Security", "LocalAuthentication", "Keychain", "KeepsakeTestSupport", "Device",
                "CloudAccount", "Platform", "Sealing",
            ]),
        .testTarget(
            name: "KeepsakeCLITests", dependencies: ["KeepsakeTestSupport"]),
        .testTarget(
            name: "EscrowTests",
            dependencies: [
                "Escrow", "Device", "CloudAccount", "Platform", "Sealing", "SecretService", "TPM",
                "KeepsakeTestSupport",
            ]),
    ],
    swiftLanguageModes: [.v6]
)

// Test hooks (seal and release observers, the Keychain's path-cache hook) compile only into debug
// builds, which is what `swift test` builds — swift-system's ENABLE_MOCKING pattern. A release build,
// the one users get, has none of them; `scripts/check-release` proves it on the binary.
for target in package.targets where target.type != .system && !target.name.hasPrefix("CKeepsake") {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .define("KEEPSAKE_TEST_HOOKS", .when(configuration: .debug))
        ]
}
