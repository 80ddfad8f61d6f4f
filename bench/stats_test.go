package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1, 1, 100}, 1},
	} {
		in := slices.Clone(tc.in)
		if got := Median(in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its input: %v", in)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // 100 ms .. 1 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}, {0.1, time.Millisecond}} {
		if got := Percentile(ds, tc.p); got != tc.want {
			t.Errorf("Percentile(1..100 ms, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("Percentile sorted its input")
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(3, 2); got != 1.5 {
		t.Errorf("Ratio(3, 2) = %v", got)
	}
	for _, tc := range [][2]float64{{1, 0}, {0, 1}, {-1, 2}, {math.NaN(), 1}, {1, math.Inf(1)}} {
		if got := Ratio(tc[0], tc[1]); !math.IsNaN(got) {
			t.Errorf("Ratio(%v, %v) = %v, want NaN", tc[0], tc[1], got)
		}
	}
}

func TestMedianRatio(t *testing.T) {
	// Per-repetition ratios 2, 4, 3: median 3, though the medians of a and b
	// (20 and 5) would give 4.
	a := []float64{20, 40, 3}
	b := []float64{10, 10, 1}
	if got := MedianRatio(a, b); got != 3 {
		t.Errorf("MedianRatio = %v, want 3", got)
	}
	if got := MedianRatio([]float64{1, 2}, []float64{0, 1}); got != 2 {
		t.Errorf("MedianRatio with a zero = %v, want 2 (the zero's ratio left out)", got)
	}
	if got := MedianRatio(nil, nil); !math.IsNaN(got) {
		t.Errorf("MedianRatio(nil, nil) = %v, want NaN", got)
	}
}

// TestSumThenRatio: a floor of two parts is summed per repetition before
// the ratio, so each ratio compares figures of one repetition.
func TestSumThenRatio(t *testing.T) {
	got := MedianRatio([]float64{3, 6, 9}, Sum([]float64{1, 1, 2}, []float64{1, 2, 1}))
	if got != 2 { // 3/2, 6/3, 9/3
		t.Fatalf("MedianRatio over Sum = %v, want 2", got)
	}
}
