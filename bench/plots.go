package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The checkpointer comparison's plots, drawn with gonum's plot from the
// run's own figures.

// cdfSeries is one checkpointer's save latencies.
type cdfSeries struct {
	Name string
	Lat  []time.Duration
}

// tputSeries is one checkpointer's turns per second at each session count.
type tputSeries struct {
	Name string
	Rate []float64
}

// cdfPoints is the empirical CDF of lat in ms: at most max points, each
// (latency, share of saves at or below it), from the fastest to the slowest.
func cdfPoints(lat []time.Duration, maxPoints int) plotter.XYs {
	s := slices.Clone(lat)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return nil
	}
	step := max(1, n/maxPoints)
	var xys plotter.XYs
	for i := 0; i < n; i += step {
		xys = append(xys, plotter.XY{X: ms(s[i]), Y: float64(i+1) / float64(n)})
	}
	if last := xys[len(xys)-1]; last.Y != 1 {
		xys = append(xys, plotter.XY{X: ms(s[n-1]), Y: 1})
	}
	return xys
}

// plotLatencyCDF draws the share of saves at or below each latency, one
// line per checkpointer, latency on a log scale, into the PNG at path.
func plotLatencyCDF(path string, series []cdfSeries) error {
	p := plot.New()
	p.Title.Text = "Save latency per turn, one session (CDF)"
	p.X.Label.Text = "latency, ms (log scale)"
	p.Y.Label.Text = "share of turns at or below"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	for i, s := range series {
		xys := cdfPoints(s.Lat, 1000)
		if len(xys) == 0 {
			return fmt.Errorf("%s: no latencies to plot", s.Name)
		}
		for j := range xys {
			xys[j].X = math.Max(xys[j].X, 1e-3) // a log scale has no zero
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(12)
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// plotThroughput draws turns per second against concurrent sessions, one
// line per checkpointer, both axes on log scales, into the PNG at path.
func plotThroughput(path string, sessions []int, series []tputSeries) error {
	p := plot.New()
	p.Title.Text = "Throughput by concurrent sessions"
	p.X.Label.Text = "concurrent sessions (log scale)"
	p.Y.Label.Text = "durable turns per second (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var ticks []plot.Tick
	for _, n := range sessions {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = float64(slices.Min(sessions))/1.2, float64(slices.Max(sessions))*8 // room on the right for the legend
	p.Y.Tick.Marker = tickers125{}
	p.Add(plotter.NewGrid())
	for i, s := range series {
		if len(s.Rate) != len(sessions) {
			return fmt.Errorf("%s: %d rates for %d session counts", s.Name, len(s.Rate), len(sessions))
		}
		var xys plotter.XYs
		for j, n := range sessions {
			if !(s.Rate[j] > 0) || math.IsInf(s.Rate[j], 0) {
				continue // not measured: no point rather than a false one
			}
			xys = append(xys, plotter.XY{X: float64(n), Y: s.Rate[j]})
		}
		if len(xys) == 0 {
			return errors.New(s.Name + ": no throughput to plot")
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.5)
		pts.Color, pts.Shape = plotutil.Color(i), plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.Name, l, pts)
	}
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(12)
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

// tickers125 labels a log axis at 1, 2 and 5 times each power of ten, where
// plot.LogTicks labels the powers alone, which a range of under ten times
// may not hold.
type tickers125 struct{}

func (tickers125) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return ticks
}
