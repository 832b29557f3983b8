import Foundation
import Platform
import Sealing

#if canImport(Glibc)
    import Glibc
#endif

/// Who a request comes from, as the transport knows it.
package enum EscrowCaller: Sendable, Hashable {
    /// A local user, by the uid `SO_PEERCRED` gave on the guess counter's socket.
    case user(UInt32)
    /// Over the network (the account's escrow, behind TLS): nothing below the protocol names the
    /// caller; a slot's budget is the one it was registered into.
    case network
}

/// The clocks an escrow reads: the wall clock (what reports say) and the time since boot
/// (`CLOCK_BOOTTIME`, with the boot's ID), which no one moves while the machine runs — the
/// delays are measured on it.
package struct EscrowClock: Sendable {
    package var wall: @Sendable () -> Date
    package var boot: @Sendable () -> BootInstant

    package init(
        wall: @escaping @Sendable () -> Date, boot: @escaping @Sendable () -> BootInstant
    ) {
        self.wall = wall
        self.boot = boot
    }

    /// The machine's clocks.
    package static let system = EscrowClock(wall: Date.init, boot: BootInstant.now)

    /// The clocks of an escrow whose nodes share one store: each node's boot clock means nothing
    /// to another's, so the delays run on the wall clock under one shared ID (a node's clock
    /// skew shortens or lengthens a delay by that much; a clock that goes back counts as none
    /// passed).
    package static let shared = EscrowClock(
        wall: Date.init,
        boot: {
            BootInstant(
                boot: Data("shared store: wall clock".utf8),
                milliseconds: Date().milliseconds)
        })
}

/// An instant of one boot: the kernel's boot ID and milliseconds of `CLOCK_BOOTTIME`.
package struct BootInstant: Sendable, Hashable {
    /// `/proc/sys/kernel/random/boot_id` (its 36 characters): new at every boot.
    package var boot: Data
    package var milliseconds: Int64

    package init(boot: Data, milliseconds: Int64) {
        self.boot = boot
        self.milliseconds = milliseconds
    }

    private static let bootID: Data =
        FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id")
        .map { Data($0.prefix(36)) } ?? Data("unknown boot".utf8)

    package static func now() -> BootInstant {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return BootInstant(
            boot: bootID, milliseconds: Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000)
    }
}

/// One caller's wrong-claim budget, as the escrow keeps it beside the slots (under `id(…)`):
/// what was spent and not yet reported, when, and the caller's live slots.
///
/// Every slot of the caller answers to it: a claim on any of them is refused once `spent`
/// reaches the slot's limit, and then every slot listed is destroyed — their secrets are gone,
/// so the budget starts again for whatever the caller registers next.
struct CallerBudget: Equatable {
    /// Wrong claims not yet shown to the owner in a report that was acknowledged.
    var spent: Int64 = 0
    /// The first and the last of them (ms since 1970 on the wall clock; 0: none).
    var firstWrong: Int64 = 0
    var lastWrong: Int64 = 0
    /// The last wrong claim on the boot clock: the boot and its `CLOCK_BOOTTIME` ms.
    var lastWrongBoot = Data()
    var lastWrongUptime: Int64 = 0
    /// The caller's live slots, the least recently used first.
    var slots: [Data] = []
    /// The wrong claims not yet reported, by the slot they were made on: a right claim reports
    /// (and its acknowledgement gives back) only its own slot's — so a slot the caller registered
    /// with a passcode of its own never gives back guesses at another slot's.
    var attributed: [Data: Int64] = [:]
    /// A slot's successor (registered with the report of a right claim on it, or signed by its
    /// reader at the account's escrow): what the slot's unreported wrong claims go to when it
    /// is removed. A slot removed without one leaves its wrong claims spent, reported to nobody.
    var successors: [Data: Data] = [:]
    /// Slots of this budget destroyed at its limit (the newest 32): told "destroyed", not "no
    /// such slot", without a record of their own each.
    var destroyed: [Data] = []

    /// The most live slots a caller keeps: registering another retires its least recently used.
    static let maximumSlots = 16

    /// The budget's key among the slots: 16 bytes named by what it belongs to, which no slot ID
    /// (random) takes.
    static func id(_ owner: String) -> Data {
        KeyDerivation.keyedHash(
            key: SecureBytes(copying: Data(count: 32)), context: "keepsake-escrow budget",
            Data(owner.utf8)
        ).unsafeData().prefix(EscrowProtocol.slotIDLength)
    }

    /// A local user's budget.
    static func id(user: UInt32) -> Data { id("uid:\(user)") }
    /// The budget a network slot registered without another's starts.
    static func id(slot: Data) -> Data { id("slot:\(slot.hexString)") }

    /// One wrong claim on `slot`, counted (before it is checked).
    mutating func countWrong(on slot: Data, at wall: Date, boot: BootInstant) {
        spent += 1
        attributed[slot, default: 0] += 1
        lastWrong = wall.milliseconds
        if firstWrong == 0 { firstWrong = lastWrong }
        lastWrongBoot = boot.boot
        lastWrongUptime = boot.milliseconds
    }

    /// A budget last counted in another boot is carried into this one: the time since its last
    /// wrong claim taken from the wall clock (none when that lies in the future), so its delay
    /// runs on this boot's clock from here, never longer than itself. Whether anything changed.
    mutating func carry(into boot: BootInstant, wall: Date) -> Bool {
        // Another boot: another ID, or (where the ID cannot be read: a service that does not see
        // /proc/sys) a boot clock that went back.
        guard lastWrong > 0,
            lastWrongBoot != boot.boot || boot.milliseconds < lastWrongUptime
        else { return false }
        let elapsed = min(max(0, wall.milliseconds - lastWrong), Int64(Int32.max))
        lastWrongBoot = boot.boot
        lastWrongUptime = boot.milliseconds - elapsed
        return true
    }

    /// The times a right claim puts back: its own count made it the last wrong one until then.
    var times: (first: Int64, last: Int64, boot: Data, uptime: Int64) {
        get { (firstWrong, lastWrong, lastWrongBoot, lastWrongUptime) }
        set { (firstWrong, lastWrong, lastWrongBoot, lastWrongUptime) = newValue }
    }

    /// `count` of `slot`'s tries back (a report of that slot's that showed them was
    /// acknowledged, or a right claim's own), never more than the slot has.
    mutating func giveBack(_ count: Int64, on slot: Data) {
        let given = min(max(0, count), attributed[slot] ?? 0)
        spent = max(0, spent - given)
        attributed[slot] = (attributed[slot] ?? 0) - given
        if attributed[slot] == 0 { attributed[slot] = nil }
        if spent == 0 { (firstWrong, lastWrong) = (0, 0) }
    }

    /// `slot` leaves the budget (removed, or retired by a registration): its unreported wrong
    /// claims go to its successor when it has one, else stay spent.
    mutating func drop(_ slot: Data) {
        slots.removeAll { $0 == slot }
        let carried = attributed.removeValue(forKey: slot)
        if let successor = successors.removeValue(forKey: slot), let carried {
            attributed[successor, default: 0] += carried
        }
        successors = successors.filter { $0.value != slot }
    }

    /// When the next claim is taken, or nil when now: the delay for what is spent, measured from
    /// the last wrong claim on the boot clock within one boot; across a reboot by the wall
    /// clock, a stored time in the future counting as now — never longer than the delay.
    func notBefore(_ policy: ClaimPolicy, wall: Date, boot: BootInstant) -> Date? {
        let delay = Int64(policy.delay(spent: spent) * 1000)
        guard delay > 0, lastWrong > 0 else { return nil }
        let elapsed: Int64 =
            lastWrongBoot == boot.boot
            ? boot.milliseconds - lastWrongUptime : wall.milliseconds - lastWrong
        let remaining = delay - min(max(elapsed, 0), delay)
        guard remaining > 0 else { return nil }
        return wall + Double(remaining) / 1000
    }

    /// `slot` is the most recently used.
    mutating func touch(_ slot: Data) {
        slots.removeAll { $0 == slot }
        slots.append(slot)
    }

    static let magic = Data("KESB".utf8)

    func encoded() -> Data {
        var record = TLV(magic: Self.magic)
        record.append(1, spent)
        record.append(2, firstWrong)
        record.append(3, lastWrong)
        record.append(4, lastWrongBoot)
        record.append(5, lastWrongUptime)
        record.append(6, slots.reduce(Data(), +))
        record.append(
            7,
            attributed.sorted { $0.key.lexicographicallyPrecedes($1.key) }.reduce(Data()) {
                $0 + $1.key + withUnsafeBytes(of: $1.value.bigEndian) { Data($0) }
            })
        record.append(
            8,
            successors.sorted { $0.key.lexicographicallyPrecedes($1.key) }.reduce(Data()) {
                $0 + $1.key + $1.value
            })
        record.append(9, destroyed.reduce(Data(), +))
        return record.bytes
    }

    /// `bytes` cut into `size`-byte pieces (nil when it does not divide, or holds over `most`).
    private static func pieces(_ bytes: Data?, _ size: Int, most: Int) -> [Data]? {
        let flat = Data(bytes ?? Data())
        guard flat.count % size == 0, flat.count <= most * size else { return nil }
        return stride(from: 0, to: flat.count, by: size).map { Data(flat[$0..<($0 + size)]) }
    }

    static func parse(_ bytes: Data) -> CallerBudget? {
        let id = EscrowProtocol.slotIDLength
        guard let fields = try? TLV.fields(bytes, magic: magic, known: 1...9),
            let attributed = pieces(fields[7].map { Data($0) }, id + 8, most: 64),
            let successors = pieces(fields[8].map { Data($0) }, 2 * id, most: 64),
            let destroyed = pieces(fields[9].map { Data($0) }, id, most: 32),
            let spent = try? fields.int64(1), spent >= 0,
            let firstWrong = try? fields.int64(2), let lastWrong = try? fields.int64(3),
            let boot = fields[4], boot.count <= 64, let uptime = try? fields.int64(5),
            fields[6] != nil, let slots = pieces(fields[6].map { Data($0) }, id, most: 64)
        else { return nil }
        return CallerBudget(
            spent: spent, firstWrong: firstWrong, lastWrong: lastWrong, lastWrongBoot: Data(boot),
            lastWrongUptime: uptime, slots: slots,
            attributed: Dictionary(
                attributed.map {
                    (
                        Data($0.prefix(id)),
                        $0.suffix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
                    )
                }, uniquingKeysWith: +),
            successors: Dictionary(
                successors.map { (Data($0.prefix(id)), Data($0.suffix(id))) },
                uniquingKeysWith: { first, _ in first }),
            destroyed: destroyed)
    }
}
