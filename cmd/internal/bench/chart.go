package bench

import (
	"fmt"
	"math"
	"strings"
)

// chart draws run latency p50 against concurrency (log scale) for every
// agentbus mode (one executor) and every LangGraph checkpointer, as SVG.
func (r *Report) chart() string {
	type series struct {
		name  string
		color string
		pts   [][2]float64
	}
	var all []series
	colors := []string{"#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd"}
	for _, m := range r.Modes {
		s := series{name: "agentbus " + m.Mode}
		for _, tp := range m.Throughput {
			if tp.Executors == 1 {
				s.pts = append(s.pts, [2]float64{float64(tp.Concurrency), tp.Latency.P50})
			}
		}
		all = append(all, s)
		if len(m.AllInOne) > 0 {
			s := series{name: "agentbus all-in-one"}
			for _, tp := range m.AllInOne {
				s.pts = append(s.pts, [2]float64{float64(tp.Concurrency), tp.Latency.P50})
			}
			all = append(all, s)
		}
	}
	for _, cp := range []string{"memory", "sqlite"} {
		s := series{name: "LangGraph " + cp}
		for _, pr := range r.Peer.Results {
			if pr.Checkpointer == cp {
				s.pts = append(s.pts, [2]float64{float64(pr.Concurrency), pr.P50})
			}
		}
		if len(s.pts) > 0 {
			all = append(all, s)
		}
	}
	const w, h, left, bottom, top, right = 640.0, 400.0, 70.0, 50.0, 30.0, 180.0
	maxX, maxY := 1.0, 1.0
	for i := range all {
		all[i].color = colors[i%len(colors)]
		for _, p := range all[i].pts {
			maxX, maxY = math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	maxY *= 1.1
	x := func(c float64) float64 { return left + (w-left-right)*math.Log2(c)/math.Max(math.Log2(maxX), 1) }
	y := func(v float64) float64 { return h - bottom - (h-bottom-top)*v/maxY }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="18" font-size="14">Run latency p50 vs concurrency (5-step plan, no model latency)</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for c := 1.0; c <= maxX; c *= 2 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f</text>`, x(c), h-bottom+16, c)
	}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.1f</text><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n",
			left-6, y(v)+4, v, left, y(v), w-right, y(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">concurrent runs</text>`, (left+w-right)/2, h-12)
	fmt.Fprintf(&b, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">ms</text>`+"\n", (top+h-bottom)/2, (top+h-bottom)/2)
	for i, s := range all {
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(p[0]), y(p[1]), s.color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), s.color)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			w-right+12, top+20*float64(i)+6, s.color, w-right+30, top+20*float64(i)+10, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
