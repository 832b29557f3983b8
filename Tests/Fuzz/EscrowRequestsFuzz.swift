// libFuzzer target: the escrow service's answer to any request (Sources/Escrow) — what anyone who
// reaches its address can send. The first byte picks the path; the rest is the body. Checks that
// nothing crashes, every answer is a well-formed escrow message within the size bound, and a
// request that is refused as malformed never changes a slot's count (its budget's record).
import Foundation
import Synchronization

final class MemorySlots: SlotStorage {
    let slots = Mutex<[Data: Data]>([:])
    func load(_ slot: Data) throws -> Data? { slots.withLock { $0[slot] } }
    func save(_ slot: Data, _ record: Data) throws { slots.withLock { $0[slot] = record } }
    func delete(_ slot: Data) throws { _ = slots.withLock { $0.removeValue(forKey: slot) } }
    func count() -> Int { slots.withLock { $0.count } }
}

let storage = MemorySlots()
let service = EscrowService(storage: storage, counter: "memory")
/// One real slot (registered through the protocol), so claims reach a record: its ID is at the
/// start of every fuzzed body's seed.
let slot: Data = {
    let client = EscrowClient { method, path, body throws(EscrowError) in
        service.answer(method: method, path: path, body: body)
    }
    return try! client.register(
        SecureBytes(randomCount: 32), passcodeKey: SecureBytes(randomCount: 32),
        salt: Data(count: KeyDerivation.saltLength), cost: .minimum, limit: 10
    ).slot
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let slot = slot  // initialized (registered through the service) outside the storage's lock
    let paths = EscrowProtocol.Path.allCases
    let path = paths[Int(data[0]) % paths.count]
    var body = Data(bytes: data + 1, count: size - 1)
    // Half the inputs name the real slot in place of their first field's value.
    if data[0] & 0x80 != 0, body.count >= 4 + 5 + 16 {
        body.replaceSubrange((body.startIndex + 9)..<(body.startIndex + 25), with: slot)
    }
    // The slot's record and its budget's (where its count is kept: a network slot's own).
    let budget = CallerBudget.id(slot: slot)
    let before = storage.slots.withLock { [$0[slot], $0[budget]] }
    let answer = service.answer(
        method: path == .status ? "GET" : "POST", path: path.rawValue, body: body)
    precondition(answer.body.count <= EscrowProtocol.maximumMessage)
    precondition((try? EscrowProtocol.fields(answer.body)) != nil)
    if answer.status == 400 {
        precondition(storage.slots.withLock { [$0[slot], $0[budget]] } == before)
    }
    return 0
}
