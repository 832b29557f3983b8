import CloudAccount
import Testing

@Suite("The conflict rule (SyncVersion): one order of writes, the same on every device")
struct SyncVersionTests {
    @Test(
        "the later write wins; at the same millisecond the higher writer; a write from before writers loses the tie"
    )
    func order() {
        let early = SyncVersion(modified: 1_000, writer: "b")
        let late = SyncVersion(modified: 1_001, writer: "a")
        #expect(early < late)
        #expect(SyncVersion(modified: 5, writer: "a") < SyncVersion(modified: 5, writer: "b"))
        #expect(SyncVersion(modified: 5, writer: "") < SyncVersion(modified: 5, writer: "a"))
        #expect(SyncVersion(modified: 5, writer: "a") == SyncVersion(modified: 5, writer: "a"))
    }

    @Test("whatever order writes arrive in, every device picks the same winner", arguments: 0..<50)
    func sameWinnerInEveryOrder(seed: Int) {
        var state = UInt64(seed + 1)
        func next() -> Int64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int64(state >> 60)  // few distinct values: ties are common
        }
        let writes = (0..<4).map { _ in
            SyncVersion(modified: next(), writer: ["a", "b", "c", ""][Int(next()) % 4])
        }
        let winner = writes.max()!
        // Every order of arrival, each device keeping the greater: one end.
        for order in permutations(Array(writes.indices)) {
            let kept = order.map { writes[$0] }.reduce(writes[order[0]]) { max($0, $1) }
            #expect(kept == winner)
        }
    }

    private func permutations(_ items: [Int]) -> [[Int]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index -> [[Int]] in
            var rest = items
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }
}
