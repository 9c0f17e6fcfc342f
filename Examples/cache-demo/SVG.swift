import Foundation

/// Draws a `Timeline` as a standalone SVG 1.1 document: time across, a row per URL with its
/// fresh and usable windows shaded after each store, each request a circle coloured by how it
/// was served and labelled with its number, that word and its latency (also drawn as a bar),
/// triangles where the origin received a request, diamonds where a background refresh
/// finished; a title, a time axis and a legend.
struct TimelineSVG {
    static let width = 1200.0
    static let left = 150.0, right = 30.0
    static let font = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"

    /// Each way of being served, its colour, in the legend's order.
    static let colours: [(status: String, colour: String)] = [
        ("fresh", "#2e7d32"), ("stale", "#f9a825"), ("revalidated", "#1565c0"), ("fallback", "#6d4c41"),
        ("miss", "#c62828"), ("expired", "#8e24aa"), ("bypass", "#757575"),
    ]
    static let freshShade = "#c8e6c9", usableShade = "#ffe6b3", refreshColour = "#00838f"

    let timeline: Timeline
    /// Seconds drawn across: the timeline's end, rounded up to the half second.
    let span: Double
    /// Pixels per second.
    let scale: Double

    init(_ timeline: Timeline) {
        self.timeline = timeline
        span = max(1, ((timeline.end + 0.2) * 2).rounded(.up) / 2)
        scale = (Self.width - Self.left - Self.right) / span
    }

    /// The horizontal position of a moment, clipped to the drawn span.
    func x(_ time: Double) -> Double { Self.left + max(0, min(time, span)) * scale }

    static func colour(of status: String) -> String {
        colours.first { $0.status == status }?.colour ?? "#000000"
    }

    /// The whole document.
    func render() -> String {
        var body = title()
        var y = 76.0
        let lanesTop = y
        for lane in timeline.lanes.indices {
            let (svg, height) = self.lane(lane, top: y)
            body += svg
            y += height + 12
        }
        body += notes(top: lanesTop - 10, bottom: y - 12)
        body += axis(at: y + 4)
        let (legend, legendHeight) = self.legend(top: y + 52)
        body += legend
        let height = (y + 52 + legendHeight + 16).rounded(.up)
        let w = Int(Self.width), h = Int(height)
        return """
        <?xml version="1.0" encoding="UTF-8" standalone="no"?>
        <svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="\(w)" height="\(h)" viewBox="0 0 \(w) \(h)" \
        font-family="\(Self.font)">
        <rect x="0" y="0" width="\(w)" height="\(h)" fill="#ffffff"/>

        """ + body + "</svg>\n"
    }

    private func title() -> String {
        """
        <title>\(escapeXML(timeline.title))</title>
        <desc>\(escapeXML(timeline.subtitle))</desc>
        <text x="20" y="32" font-size="20" font-weight="bold" fill="#111111">\(escapeXML(timeline.title))</text>
        <text x="20" y="54" font-size="13" fill="#333333">\(escapeXML(timeline.subtitle))</text>

        """
    }

    /// A lane: its windows, origin requests, refreshes and requests. - Returns: the SVG and its height.
    private func lane(_ index: Int, top: Double) -> (String, Double) {
        let lane = timeline.lanes[index]
        let requests = timeline.requests.filter { $0.lane == index }.sorted { $0.start < $1.start }
        let rows = labelRows(requests)
        let height = 108 + Double(rows.values.max().map { $0 + 1 } ?? 1) * 30
        var svg = "<g class=\"lane\" id=\"lane-\(index + 1)\">\n"
        for window in timeline.windows(of: index) {
            svg += shade(window.fresh, top: top, height: height, fill: Self.freshShade, label: "fresh")
            svg += shade(window.usable, top: top, height: height, fill: Self.usableShade, label: "usable")
        }
        svg += rect(Self.left, top, Self.width - Self.left - Self.right, height, fill: "none", extra: "stroke=\"#9e9e9e\"")
        svg += text(12, top + 22, "GET " + lane.path, size: 14, weight: "bold")
        svg += text(12, top + 40, "fresh \(Self.seconds(lane.fresh)) s", size: 11)
        svg += text(12, top + 54, "usable \(Self.seconds(lane.usable)) s", size: 11)
        for mark in timeline.marks where mark.lane == index {
            switch mark.kind {
            case .originRequest: svg += originMark(at: x(mark.time), top: top)
            case .refreshed: svg += refreshMark(mark, requests: requests, top: top)
            case .stored: break
            }
        }
        for request in requests { svg += self.request(request, row: rows[request.n] ?? 0, top: top) }
        return (svg + "</g>\n", height)
    }

    /// Each request's label row: the first row where its label clears the one before it.
    private func labelRows(_ requests: [Timeline.Request]) -> [Int: Int] {
        var rowEnds: [Double] = []
        var rows: [Int: Int] = [:]
        for request in requests {
            let start = labelX(request)
            let width = labelWidth(request)
            let row = rowEnds.firstIndex { $0 < start } ?? rowEnds.count
            if row == rowEnds.count { rowEnds.append(0) }
            rowEnds[row] = start + width
            rows[request.n] = row
        }
        return rows
    }

    private func label(_ request: Timeline.Request) -> String { "#\(request.n) \(request.status)" }

    /// About how wide a request's label is (the wider of its two lines, and a gap).
    private func labelWidth(_ request: Timeline.Request) -> Double {
        Double(max(label(request).count, latency(request).count)) * 7.2 + 10
    }

    /// Where a request's label begins: under its mark, moved left to end inside the lane.
    private func labelX(_ request: Timeline.Request) -> Double {
        min(x(request.start) - 4, Self.width - Self.right - labelWidth(request) + 6)
    }

    private func latency(_ request: Timeline.Request) -> String {
        request.ms < 10 ? String(format: "%.1f ms", request.ms) : "\(Int(request.ms.rounded())) ms"
    }

    /// A request: a circle in its status's colour, its latency as a bar, and below, joined by
    /// a leader line, its number, status word and latency in text.
    private func request(_ request: Timeline.Request, row: Int, top: Double) -> String {
        let colour = Self.colour(of: request.status)
        let cx = x(request.start), cy = top + 68
        let barWidth = max(2, x(request.start + request.ms / 1000) - cx)
        let labelTop = top + 108 + Double(row) * 30
        return """
        <g class="request \(escapeXML(request.status))" id="request-\(request.n)">
        <title>\(escapeXML("request \(request.n): \(request.status), \(latency(request)), sent at \(Self.seconds(request.start)) s"))</title>
        <line x1="\(n(cx))" y1="\(n(cy + 18))" x2="\(n(cx))" y2="\(n(labelTop - 12))" stroke="#9e9e9e" stroke-width="1"/>
        <rect class="latency" x="\(n(cx))" y="\(n(cy + 10))" width="\(n(barWidth))" height="6" fill="\(colour)"/>
        <circle cx="\(n(cx))" cy="\(n(cy))" r="7" fill="\(colour)" stroke="#111111" stroke-width="1"/>
        \(text(labelX(request), labelTop, label(request), size: 12, weight: "bold", fill: "#111111"))\
        \(text(labelX(request), labelTop + 13, latency(request), size: 11, fill: "#333333"))\
        </g>

        """
    }

    /// A triangle pointing down at the lane's top: the origin received a request.
    private func originMark(at cx: Double, top: Double) -> String {
        let points = "\(n(cx - 6)),\(n(top + 8)) \(n(cx + 6)),\(n(top + 8)) \(n(cx)),\(n(top + 20))"
        return "<polygon class=\"origin-request\" points=\"\(points)\" fill=\"#212121\"/>\n"
    }

    /// A diamond where a refresh finished, joined by a dashed line to the stale request that
    /// started it (the last stale one before it).
    private func refreshMark(_ mark: Timeline.Mark, requests: [Timeline.Request], top: Double) -> String {
        let cx = x(mark.time), cy = top + 38
        var svg = ""
        if let stale = requests.last(where: { $0.status == "stale" && $0.start <= mark.time }) {
            svg += "<path d=\"M \(n(x(stale.start))) \(n(top + 60)) L \(n(cx)) \(n(cy))\" stroke=\"\(Self.refreshColour)\" "
                + "stroke-width=\"1.5\" stroke-dasharray=\"4 3\" fill=\"none\"/>\n"
        }
        let points = "\(n(cx)),\(n(cy - 7)) \(n(cx + 7)),\(n(cy)) \(n(cx)),\(n(cy + 7)) \(n(cx - 7)),\(n(cy))"
        svg += "<polygon class=\"refresh\" points=\"\(points)\" fill=\"#ffffff\" stroke=\"\(Self.refreshColour)\" stroke-width=\"2\"/>\n"
        return svg + text(cx + 10, cy + 4, "refreshed", size: 11, fill: Self.refreshColour)
    }

    /// A window's shading, named at its top when there is room.
    private func shade(_ period: ClosedRange<Double>, top: Double, height: Double, fill: String, label: String) -> String {
        let from = x(period.lowerBound), to = x(period.upperBound)
        guard to - from > 0.5 else { return "" }
        var svg = rect(from, top, to - from, height, fill: fill, extra: "class=\"window \(label)\"")
        if to - from > 44 { svg += text(from + 3, top + height - 6, label, size: 10, fill: "#555555") }
        return svg
    }

    /// Dashed lines across the lanes for the notes (the origin stopped), named above.
    private func notes(top: Double, bottom: Double) -> String {
        timeline.notes.map { note in
            let nx = x(note.time)
            return "<line class=\"note\" x1=\"\(n(nx))\" y1=\"\(n(top))\" x2=\"\(n(nx))\" y2=\"\(n(bottom))\" stroke=\"#b71c1c\" "
                + "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n"
                + text(nx, top - 2, note.text, size: 11, fill: "#b71c1c", anchor: "middle")
        }.joined()
    }

    /// The time axis: a tick every half second (every second past ten), labelled each second.
    private func axis(at y: Double) -> String {
        let step = span <= 10 ? 0.5 : (span / 20).rounded(.up)
        var svg = "<line x1=\"\(n(Self.left))\" y1=\"\(n(y))\" x2=\"\(n(x(span)))\" y2=\"\(n(y))\" stroke=\"#212121\"/>\n"
        var tick = 0.0
        while tick <= span + 1e-9 {
            let whole = tick.rounded() == tick
            svg += "<line x1=\"\(n(x(tick)))\" y1=\"\(n(y))\" x2=\"\(n(x(tick)))\" y2=\"\(n(y + (whole ? 8 : 4)))\" stroke=\"#212121\"/>\n"
            if whole { svg += text(x(tick), y + 22, "\(Int(tick)) s", size: 11, anchor: "middle") }
            tick += step
        }
        return svg + text(x(span / 2), y + 40, "time since the walkthrough began", size: 12, anchor: "middle")
    }
}

extension TimelineSVG {
    /// A number for an attribute: at most one decimal.
    func n(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    /// Seconds in few digits: `1`, `0.5`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.2g", value)
    }

    func text(_ x: Double, _ y: Double, _ content: String, size: Int, weight: String = "normal",
              fill: String = "#212121", anchor: String = "start") -> String {
        "<text x=\"\(n(x))\" y=\"\(n(y))\" font-size=\"\(size)\" font-weight=\"\(weight)\" fill=\"\(fill)\" "
            + "text-anchor=\"\(anchor)\">\(escapeXML(content))</text>\n"
    }

    func rect(_ x: Double, _ y: Double, _ width: Double, _ height: Double, fill: String, extra: String = "") -> String {
        "<rect x=\"\(n(x))\" y=\"\(n(y))\" width=\"\(n(width))\" height=\"\(n(height))\" fill=\"\(fill)\"\(extra.isEmpty ? "" : " " + extra)/>\n"
    }
}

/// Text made safe for XML character data and attribute values.
func escapeXML(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&apos;"
        // Control characters XML 1.0 cannot hold at all.
        case _ where character.unicodeScalars.contains(where: { $0.value < 0x20 && !["\t", "\n", "\r"].contains($0) }):
            out += "\u{FFFD}"
        default: out.append(character)
        }
    }
    return out
}
