import Foundation
import Platform
import Testing

@Suite("Strict JSON: one value per key")
struct StrictJSONTests {
    private func refused(_ text: String) -> Bool {
        (try? StrictJSON.object(Data(text.utf8))) == nil
    }

    @Test("a key twice in one object is refused, escaped or not, at any depth; distinct keys pass")
    func duplicates() throws {
        #expect(refused(#"{"a":1,"a":2}"#))
        #expect(refused(#"{"a":1,"\u0061":2}"#))
        #expect(refused(#"{"x":{"b":[1,{"c":1,"c":1}]}}"#))
        #expect(refused(#"{"\ud83d\ude00":1,"😀":2}"#))
        // Canonically equivalent keys: two keys to the scan (a name is its bytes), which a Swift
        // dictionary cannot hold apart — refused as well, never merged into one.
        #expect((try? StrictJSON.checkKeys(Data(#"{"caf\u00e9":1,"cafe\u0301":2}"#.utf8))) != nil)
        #expect(refused(#"{"caf\u00e9":1,"cafe\u0301":2}"#))
        #expect(
            try StrictJSON.object(Data(#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#.utf8)).count == 2)
        // A value equal to a key is no key; strings with escaped quotes are read whole.
        #expect(try StrictJSON.object(Data(#"{"a":"a","b":"\"a\"","c":"}"}"#.utf8)).count == 3)
        // Two lone surrogates are two keys to the scan (the parser then refuses them).
        #expect(try StrictJSON.checkKeys(Data(#"{"\ud800":1,"\ud801":2}"#.utf8)) == 2)
        #expect(refused(#"{"\ud800":1,"\ud800":2}"#))
    }

    @Test("not an object, not JSON, or nested too deep: refused")
    func shapes() {
        #expect(refused("[]"))
        #expect(refused("not json"))
        #expect(refused(String(repeating: "[", count: 100_000)))
        #expect((try? StrictJSON.object(Data(#"{"a":{"b":{}}}"#.utf8), maximumDepth: 2)) == nil)
    }
}
