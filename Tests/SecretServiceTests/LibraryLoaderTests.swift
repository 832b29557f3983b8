import CKeepsakeLoader
import Foundation
import Testing

/// The one loader the shims load libsecret, tpm2-tss and libcurl with, on the C library itself.
@Suite(
    "Loading a C library when first used: its functions from the named libraries only, a clear error"
)
struct LibraryLoaderTests {
    /// Loads `functions` from `libraries` into a table of pointers; the result, the table and the
    /// error text.
    private func load(
        _ libraries: [String], _ functions: [String], errorSize: Int = 320
    ) -> (loaded: Bool, table: [UnsafeMutableRawPointer?], error: String) {
        let stride = MemoryLayout<UnsafeMutableRawPointer?>.stride
        var table = [UnsafeMutableRawPointer?](repeating: nil, count: functions.count)
        var error = [CChar](repeating: 0, count: errorSize)
        let libraryNames = libraries.map { strdup($0) }
        let functionNames = functions.map { strdup($0) }
        defer { (libraryNames + functionNames).forEach { free($0) } }
        let symbols = functionNames.enumerated().map { index, name in
            keepsake_symbol(name: UnsafePointer(name), offset: index * stride)
        }
        let libraryPointers = libraryNames.map { UnsafePointer($0) }
        let loaded = table.withUnsafeMutableBytes { slots in
            keepsake_load_table(
                libraryPointers, libraries.count, RTLD_NOW, symbols, symbols.count,
                slots.baseAddress, "the-package", &error, error.count)
        }
        let text = error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return (loaded == 1, table, String(decoding: text, as: UTF8.self))
    }

    @Test("every function is found, at the address the library gives it")
    func loadsTheTable() throws {
        let result = load(["libc.so.6"], ["strlen", "getpid"])
        #expect(result.loaded)
        let libc = try #require(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD))
        #expect(result.table[0] == dlsym(libc, "strlen"))
        #expect(result.table[1] == dlsym(libc, "getpid"))
    }

    @Test("a library that is not there is named, with the package that provides it")
    func missingLibrary() {
        let result = load(["libc.so.6", "libkeepsake-nonexistent.so.0"], ["strlen"])
        #expect(!result.loaded)
        #expect(
            result.error.hasPrefix(
                "libkeepsake-nonexistent.so.0 could not be loaded (install the-package): "))
    }

    @Test(
        "a function is taken from the named libraries only, never from elsewhere in the process, and a missing one is named"
    )
    func namedLibrariesOnly() throws {
        // The Swift runtime's swift_retain is in this process (RTLD_DEFAULT finds it), not in
        // libc's or libm's tree.
        #expect(dlsym(nil, "swift_retain") != nil)
        let result = load(["libc.so.6", "libm.so.6"], ["strlen", "swift_retain"])
        #expect(!result.loaded)
        #expect(result.error == "no swift_retain in libc.so.6 or libm.so.6")
    }

    @Test(
        "the error never runs past its buffer, and more libraries than the loader takes are refused"
    )
    func bounded() {
        let short = load(
            ["libc.so.6"], ["keepsake_no_such_function_with_a_long_name"], errorSize: 16)
        #expect(!short.loaded)
        #expect(short.error == "no keepsake_no_")
        let five = load(Array(repeating: "libc.so.6", count: 5), ["strlen"])
        #expect(!five.loaded)
        #expect(five.error == "the loader takes 1 to 4 libraries")
    }
}
