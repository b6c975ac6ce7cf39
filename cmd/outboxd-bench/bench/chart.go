package bench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteChart draws r as a PNG into file: the backlog drains as grouped
// bars beside their limits, the steady-state latency percentiles of the
// relays on a log scale, and by offered rate the insert→consumer
// latency and each relay's CPU per event.
func WriteChart(r *Results, file string) error {
	plots := []*plot.Plot{throughputPlot(r)}
	if len(r.Steady) > 0 {
		plots = append(plots, latencyPlot(r),
			byRatePlot(r, "Insert → consumer p50 (solid) and p99 (dashed) by rate", "ms", true, func(s SteadyCase) []float64 {
				return []float64{s.InsertLatency.P50, s.InsertLatency.P99}
			}),
			byRatePlot(r, "Relay CPU per event by rate", "µs per event", false, func(s SteadyCase) []float64 {
				return []float64{s.microsPerEvent(s.CPU.Relay)}
			}))
	}
	// Two plots a row.
	var grid [][]*plot.Plot
	for i := 0; i < len(plots); i += 2 {
		grid = append(grid, plots[i:min(i+2, len(plots))])
	}
	if last := grid[len(grid)-1]; len(grid) > 1 && len(last) == 1 {
		grid[len(grid)-1] = append(last, nil) // Align wants a full grid
	}
	cols := len(grid[0])
	img := vgimg.New(vg.Points(float64(620*cols)), vg.Points(float64(460*len(grid))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(grid), Cols: cols, PadX: vg.Points(24), PadY: vg.Points(24), PadTop: vg.Points(8),
		PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	return f.Close()
}

// byRatePlot draws, for each relay with a consumer, values(case) against
// the offered rate: one line per value, the first solid, the next dashed.
func byRatePlot(r *Results, title, unit string, logY bool, values func(SteadyCase) []float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered events/s"
	p.Y.Label.Text = unit
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, relay := range []string{relayOutboxd, relaySync, relayPolling} {
		var lines []plotter.XYs
		for _, s := range r.Steady {
			if s.Relay != relay {
				continue
			}
			for j, v := range values(s) {
				if j >= len(lines) {
					lines = append(lines, nil)
				}
				lines[j] = append(lines[j], plotter.XY{X: float64(s.Rate), Y: max(v, 0.01)})
			}
		}
		for j, pts := range lines {
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				continue
			}
			line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
			if j > 0 {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(line, points)
			if j == 0 {
				p.Legend.Add(relay, line, points)
			}
		}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func throughputPlot(r *Results) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Backlog drain (median of %d), events/s", r.Settings.Runs)
	p.Y.Label.Text = "events/s"
	p.Y.Min = 0
	labels := make([]string, len(r.Backlogs))
	for i, c := range r.Backlogs {
		labels[i] = fmt.Sprintf("%s × %d-row tx", count(c.Size), c.Shape)
	}
	series := []struct {
		name string
		rate func(BacklogCase) float64
	}{
		{"decode limit (pg_recvlogical)", func(c BacklogCase) float64 { return c.DecodeRate }},
		{"broker limit (nats bench, best mode)", func(c BacklogCase) float64 { return r.broker(c.Size).Limit() }},
		{"outboxd → JetStream", func(c BacklogCase) float64 { return c.OutboxdRate }},
		{"outboxd → null sink", func(c BacklogCase) float64 { return c.NullRate }},
	}
	width := vg.Points(22)
	top := 0.0
	for i, s := range series {
		vals := make(plotter.Values, len(r.Backlogs))
		for j, c := range r.Backlogs {
			vals[j] = s.rate(c)
			top = max(top, vals[j])
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			continue // no backlog: nothing to draw
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.Y.Max = top * 1.3 // room for the legend above the bars
	p.Legend.Top = true
	p.NominalX(labels...)
	p.Add(plotter.NewGrid())
	return p
}

func latencyPlot(r *Results) *plot.Plot {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Commit → consumer latency, %.0f s at each offered load", r.Settings.LatencySeconds)
	p.Y.Label.Text = "ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	top := p99TargetMS
	for i, s := range r.Steady {
		top = max(top, s.Latency.Max)
		pts := make(plotter.XYs, 4)
		for j, v := range []float64{s.Latency.P50, s.Latency.P99, s.Latency.P999, s.Latency.Max} {
			pts[j] = plotter.XY{X: float64(j), Y: max(v, 0.01)} // a log scale has no 0
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		switch s.Relay {
		case relayPolling:
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		case relayReader:
			line.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
		}
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s at %s/s", s.Relay, count(s.Rate)), line, points)
	}
	target := plotter.NewFunction(func(float64) float64 { return p99TargetMS })
	target.Color = color.Gray{Y: 120}
	target.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(target)
	p.Legend.Add(fmt.Sprintf("target p99 < %.0f ms at %s/s", p99TargetMS, count(p99TargetRate)), target)
	p.Y.Max = top * 20 // a log scale's room for the legend above the lines
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX("p50", "p99", "p99.9", "max")
	p.Add(plotter.NewGrid())
	return p
}
