// `public` is what README documents: compares README's "Public API (the products)" table with
// the public symbols of each product's modules (the symbol graphs `swift package
// dump-symbol-graph --minimum-access-level public` emits), and fails on either side's extra.
//
//   swift scripts/check-api.swift README.md SYMBOL_GRAPH_DIR
//
// SYMBOL_GRAPH_DIR holds one folder per module (`Keychain/Keychain.symbols.json`, …), as
// scripts/check-docs lays them out. In the table, each row's first cell names the product (and
// the modules it brings, in parentheses: `Device` (+ `SecretService`, `Sealing`)); every
// backticked name in its second cell must be a public symbol of those modules (a type, a
// function, a member), and every public top-level symbol of those modules must be named there.
// `X{A,B}Y` names XAY and XBY; a name ending in `…` names every symbol it begins.
//
// And every public declaration written in Sources (a type, member, case, initialiser, constant)
// has a doc comment: one without fails, named with its file and line.
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: swift scripts/check-api.swift README.md SYMBOL_GRAPH_DIR")
    exit(2)
}
let readme = try String(contentsOfFile: arguments[1], encoding: .utf8)
let graphs = URL(fileURLWithPath: arguments[2])

guard let start = readme.range(of: "## Public API"),
    let end = readme.range(of: "\n## ", range: start.upperBound..<readme.endIndex)
else {
    print("check-api: README has no \"## Public API\" section")
    exit(1)
}
let rows = readme[start.upperBound..<end.lowerBound].split(separator: "\n")
    .filter { $0.hasPrefix("| `") }

/// The backticked names of a table cell, braces expanded, parameter lists dropped.
func names(_ cell: Substring) -> [String] {
    var found: [String] = []
    var rest = cell[...]
    while let open = rest.firstIndex(of: "`") {
        let after = rest.index(after: open)
        guard let close = rest[after...].firstIndex(of: "`") else { break }
        let token = String(rest[after..<close])
        rest = rest[rest.index(after: close)...]
        if let brace = token.firstIndex(of: "{"), let shut = token.firstIndex(of: "}") {
            let head = token[..<brace]
            let tail = token[token.index(after: shut)...]
            for part in token[token.index(after: brace)..<shut].split(separator: ",") {
                found.append(String(head) + String(part) + String(tail))
            }
        } else {
            found.append(token)
        }
    }
    return found.map { name in
        let bare = name.split(separator: "(").first.map(String.init) ?? name
        return bare.split(separator: ".").last.map(String.init) ?? bare
    }.filter { $0.first.map { $0.isLetter || $0 == "_" } ?? false }
}

/// One module's public symbols: top-level names and every name (members included).
func symbols(of module: String) throws -> (topLevel: Set<String>, all: Set<String>) {
    var topLevel: Set<String> = []
    var all: Set<String> = []
    let folder = graphs.appendingPathComponent(module)
    for file in try FileManager.default.contentsOfDirectory(atPath: folder.path)
    where file.hasSuffix(".symbols.json") {
        let data = try Data(contentsOf: folder.appendingPathComponent(file))
        guard let graph = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let list = graph["symbols"] as? [[String: Any]]
        else { continue }
        // Extensions of other modules' types (`Security@Foundation`) add members, not names.
        let ownFile = file == "\(module).symbols.json"
        for symbol in list {
            guard symbol["accessLevel"] as? String == "public",
                let path = symbol["pathComponents"] as? [String], let last = path.last
            else { continue }
            let bare = last.split(separator: "(").first.map(String.init) ?? last
            all.insert(bare)
            if path.count == 1 && ownFile { topLevel.insert(bare) }
        }
    }
    return (topLevel, all)
}

var problems: [String] = []

/// Every public symbol declared in this checkout's Sources without a doc comment, in each
/// module's graphs.
func undocumented() throws -> [String] {
    var found: [String] = []
    for module in try FileManager.default.contentsOfDirectory(atPath: graphs.path).sorted() {
        let folder = graphs.appendingPathComponent(module)
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where file.hasSuffix(".symbols.json") {
            let data = try Data(contentsOf: folder.appendingPathComponent(file))
            guard let graph = try JSONSerialization.jsonObject(with: data) as? [String: Any],
                let list = graph["symbols"] as? [[String: Any]]
            else { continue }
            for symbol in list where symbol["accessLevel"] as? String == "public" {
                guard let location = symbol["location"] as? [String: Any],
                    let uri = location["uri"] as? String, let at = uri.range(of: "/Sources/"),
                    symbol["docComment"] == nil
                else { continue }
                let line = ((location["position"] as? [String: Any])?["line"] as? Int ?? -1) + 1
                let path = (symbol["pathComponents"] as? [String])?.joined(separator: ".") ?? "?"
                found.append("Sources/\(uri[at.upperBound...]):\(line): public \(path) has no doc comment")
            }
        }
    }
    return Array(Set(found)).sorted()
}
problems += try undocumented()

for row in rows {
    let cells = row.split(separator: "|", omittingEmptySubsequences: false)
    guard cells.count >= 3 else { continue }
    let modules = names(cells[1])
    guard let product = modules.first else { continue }
    let documented = names(cells[2])
    let patterns = documented.filter { $0.hasSuffix("…") }.map { String($0.dropLast()) }
    let exact = Set(documented.filter { !$0.hasSuffix("…") })
    var topLevel: Set<String> = []
    var all: Set<String> = []
    for module in modules {
        guard let found = try? symbols(of: module) else {
            problems.append("\(product): no symbol graph for module \(module)")
            continue
        }
        topLevel.formUnion(found.topLevel)
        all.formUnion(found.all)
    }
    for name in topLevel.sorted()
    where !exact.contains(name) && !patterns.contains(where: { name.hasPrefix($0) }) {
        problems.append("\(product): public \(name) is not in README's Public API table")
    }
    for name in exact.sorted() where !all.contains(name) {
        problems.append("\(product): README names \(name), which is no public symbol")
    }
}
if rows.isEmpty { problems.append("README's Public API table has no rows") }
for problem in problems { print("check-api: \(problem)") }
print("check-api: \(rows.count) products, \(problems.count) problem(s)")
exit(problems.isEmpty ? 0 : 1)
