import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
@testable import cache_demo

/// The walkthrough's timeline and the SVG drawn from it.
@Suite("The demo's SVG timeline")
struct DemoTimelineTests {
    /// A timeline written by hand: two lanes, every status, stores, a refresh, a note, and
    /// text that XML must escape.
    static let scripted: Timeline = {
        var timeline = Timeline(title: "walk <through> & \"back\"", subtitle: "store: disk /tmp/a&b",
                                lanes: [.init(path: "/resource", fresh: 1, usable: 3), .init(path: "/validated", fresh: 0.5, usable: 1)])
        let statuses = ["miss", "fresh", "stale", "fresh", "expired", "miss", "revalidated", "fallback", "bypass"]
        timeline.requests = statuses.enumerated().map { index, status in
            .init(n: index + 1, lane: index < 5 ? 0 : 1, start: Double(index) * 0.6, ms: status == "fresh" ? 0.4 : 52, status: status)
        }
        timeline.marks = [.init(kind: .originRequest, lane: 0, time: 0), .init(kind: .stored, lane: 0, time: 0.05),
                          .init(kind: .originRequest, lane: 0, time: 1.2), .init(kind: .stored, lane: 0, time: 1.25),
                          .init(kind: .refreshed, lane: 0, time: 1.25), .init(kind: .stored, lane: 1, time: 3.05)]
        timeline.notes = [.init(time: 4.5, text: "origin <stopped>")]
        return timeline
    }()

    @Test("the SVG is standalone SVG 1.1 that parses as XML, with one mark per request labelled with its number and status word")
    func marks() throws {
        let svg = TimelineSVG(Self.scripted).render()
        let document = try SVGDocument(svg)
        let root = try #require(document.elements.first)
        #expect(root.name == "svg" && root.attributes["version"] == "1.1")
        #expect(svg.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "))
        let width = try #require(root.attributes["width"]), height = try #require(root.attributes["height"])
        #expect(root.attributes["viewBox"] == "0 0 \(width) \(height)")
        #expect(document.text(of: "title").first == "walk <through> & \"back\"", "escaped in the file, read back whole")
        #expect(svg.contains("walk &lt;through&gt; &amp; &quot;back&quot;") && document.text(of: "desc") == ["store: disk /tmp/a&b"])

        let requests = document.groups.filter { $0.classes.first == "request" }
        #expect(requests.count == Self.scripted.requests.count)
        for request in Self.scripted.requests {
            let group = try #require(requests.first { $0.id == "request-\(request.n)" })
            #expect(group.classes == ["request", request.status])
            #expect(group.texts.contains("#\(request.n) \(request.status)"), "the status word in text, not only the colour")
            #expect(group.texts.contains(request.ms < 10 ? "0.4 ms" : "52 ms"), "its latency")
            #expect(group.elements.filter { $0 == "circle" }.count == 1 && group.elements.contains("rect"))
        }
        #expect(document.count("polygon", class: "origin-request") == 2 && document.count("polygon", class: "refresh") == 1)
        #expect(document.texts.contains("origin <stopped>") && document.texts.contains("GET /validated"))
        for words in ["fresh window after a store", "the origin received a request", "background refresh finished (dashed from the stale request)"] {
            #expect(document.texts.contains(words), "legend: \(words)")
        }
        // Three stores, each shading its fresh and usable windows (the first lane's first usable
        // window stops at its second store).
        #expect(document.count("rect", class: "window fresh") == 3 && document.count("rect", class: "window usable") == 3)
    }

    @Test("the windows after each store end when they run out or at the next store, and start no earlier than 0")
    func windows() {
        var timeline = Timeline(title: "t", lanes: [.init(path: "/r", fresh: 1, usable: 3)])
        timeline.marks = [-2, 1, 2.5, -5].map { .init(kind: .stored, lane: 0, time: $0) }
        let windows = timeline.windows(of: 0).map { [$0.fresh.lowerBound, $0.fresh.upperBound, $0.usable.lowerBound, $0.usable.upperBound] }
        // -5 ends before 0 (nothing drawn); -2 is usable until 1, where the next store begins.
        #expect(windows == [[0, 0, 0, 1], [1, 2, 2, 2.5], [2.5, 3.5, 3.5, 5.5]])
        #expect(timeline.lane(of: "http://demo-origin/r?x=1") == 0 && timeline.lane(of: "/other") == nil)
    }

    @Test("XML escaping covers markup characters, quotes and control characters XML cannot hold")
    func escaping() {
        #expect(escapeXML(#"a<b>&"c"'d"#) == "a&lt;b&gt;&amp;&quot;c&quot;&apos;d")
        #expect(escapeXML("bell\u{7}") == "bell\u{FFFD}" && escapeXML("tab\tok") == "tab\tok")
    }
}

/// An SVG read back with Foundation's `XMLParser`: every element in order, its attributes,
/// the text of each `g`, and the texts of the whole document.
final class SVGDocument: NSObject, XMLParserDelegate {
    struct Element {
        let name: String
        let attributes: [String: String]
    }

    struct Group {
        let id: String
        let classes: [String]
        var elements: [String] = []
        var texts: [String] = []
    }

    private(set) var elements: [Element] = []
    private(set) var groups: [Group] = []
    private(set) var texts: [String] = []
    private var open: [String] = []
    private var groupStack: [Int] = []
    private var characters = ""
    private var textsByElement: [String: [String]] = [:]

    struct ParseError: Error { let description: String }

    init(_ text: String) throws {
        super.init()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = self
        guard parser.parse() else { throw ParseError(description: parser.parserError.map { "\($0)" } ?? "unknown") }
    }

    func text(of element: String) -> [String] { textsByElement[element] ?? [] }

    func count(_ name: String, class className: String) -> Int {
        elements.filter { $0.name == name && $0.attributes["class"] == className }.count
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        elements.append(Element(name: name, attributes: attributes))
        open.append(name)
        characters = ""
        if let index = groupStack.last { groups[index].elements.append(name) }
        if name == "g" {
            groups.append(Group(id: attributes["id"] ?? "", classes: (attributes["class"] ?? "").split(separator: " ").map(String.init)))
            groupStack.append(groups.count - 1)
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { characters += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        open.removeLast()
        if name == "g" { groupStack.removeLast() }
        if name == "text" || name == "title" || name == "desc" {
            textsByElement[name, default: []].append(characters)
            if name == "text" {
                texts.append(characters)
                if let index = groupStack.last { groups[index].texts.append(characters) }
            }
        }
        characters = ""
    }
}
