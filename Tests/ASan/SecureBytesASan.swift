// Built by scripts/asan with AddressSanitizer together with Sources/Sealing: key memory is
// released exactly once, whatever `fill` does. A double free or a use after free aborts the run.

struct FillFailed: Error {}

@main
enum SecureBytesASan {
    static func main() {
        var refused = 0
        for count in [0, 1, 32, 4096] {
            do {
                _ = try SecureBytes(count: count) { buffer in
                    if count > 0 { buffer[0] = 0xA5 }
                    throw FillFailed()
                }
            } catch {
                refused += 1
            }
        }
        for count in [0, 1, 32, 4096] {
            let key = SecureBytes(count: count) { buffer in
                for index in buffer.indices { buffer[index] = 0x5A }
            }
            precondition(key.count == count)
            precondition(key == SecureBytes(copying: [UInt8](repeating: 0x5A, count: count)))
            precondition(
                constantTimeEquals(key.unsafeData(), [UInt8](repeating: 0x5A, count: count)))
        }
        // A non-contiguous source goes through a wiped temporary.
        let joined = [UInt8](repeating: 1, count: 7).lazy.map { $0 }
        precondition(SecureBytes(copying: Array(joined)).count == 7)
        precondition(refused == 4, "every throwing fill must throw")
        print(
            "asan SecureBytes: \(refused) throwing fills released once, 4 kept buffers released at deinit"
        )
    }
}
