import Foundation

extension TimelineSVG {
    /// One entry of the legend: its symbol (drawn at x, centred on y) and its words.
    private struct Item {
        let symbol: (Double, Double) -> String
        let words: String
    }

    /// The legend: each status's colour and word, then the marks and the shading, flowing
    /// across and wrapping. - Returns: the SVG and its height.
    func legend(top: Double) -> (String, Double) {
        var svg = text(20, top, "how each request was served (the word is also written under each mark):", size: 12, weight: "bold")
        var x = 20.0, y = top + 22
        func place(_ item: Item) {
            let width = 26 + Double(item.words.count) * 7 + 18
            if x + width > Self.width - 20 { x = 20; y += 24 }
            svg += item.symbol(x + 8, y - 4) + text(x + 22, y, item.words, size: 12)
            x += width
        }
        for (status, colour) in Self.colours {
            place(Item(symbol: { "<circle cx=\"\(self.n($0))\" cy=\"\(self.n($1))\" r=\"7\" fill=\"\(colour)\" stroke=\"#111111\"/>\n" },
                       words: status))
        }
        x = 20
        y += 30
        svg += text(20, y, "marks and shading:", size: 12, weight: "bold")
        y += 22
        for item in markItems { place(item) }
        return (svg, y - top + 8)
    }

    private var markItems: [Item] {
        [
            Item(symbol: { "<polygon points=\"\(self.n($0 - 6)),\(self.n($1 - 6)) \(self.n($0 + 6)),\(self.n($1 - 6)) \(self.n($0)),\(self.n($1 + 6))\" fill=\"#212121\"/>\n" },
                 words: "the origin received a request"),
            Item(symbol: { "<polygon points=\"\(self.n($0)),\(self.n($1 - 7)) \(self.n($0 + 7)),\(self.n($1)) \(self.n($0)),\(self.n($1 + 7)) \(self.n($0 - 7)),\(self.n($1))\" fill=\"#ffffff\" stroke=\"\(Self.refreshColour)\" stroke-width=\"2\"/>\n" },
                 words: "background refresh finished (dashed from the stale request)"),
            Item(symbol: { self.rect($0 - 4, $1 - 4, 14, 5, fill: "#616161") }, words: "latency: bar length, and ms in text"),
            Item(symbol: { self.rect($0 - 8, $1 - 8, 16, 16, fill: Self.freshShade) }, words: "fresh window after a store"),
            Item(symbol: { self.rect($0 - 8, $1 - 8, 16, 16, fill: Self.usableShade) },
                 words: "usable window: served stale, refreshed in the background"),
            Item(symbol: { "<line x1=\"\(self.n($0))\" y1=\"\(self.n($1 - 9))\" x2=\"\(self.n($0))\" y2=\"\(self.n($1 + 9))\" stroke=\"#b71c1c\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n" },
                 words: "a moment of note"),
        ]
    }
}
