package main

import (
	"math"
	"slices"
	"time"
)

// Median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds:
// the smallest value with at least p% of the values at or below it. It
// returns 0 for none. ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Ratio is a over b, or NaN when either is not a positive finite number, so
// that a missing figure never reads as a good one.
func Ratio(a, b float64) float64 {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return math.NaN()
	}
	return a / b
}

// Sum returns the element-wise sums of a and b, figures of the same
// repetitions; the slices must have the same length.
func Sum(a, b []float64) []float64 {
	if len(a) != len(b) {
		panic("Sum: slices of different lengths")
	}
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// MedianRatio is the median over repetitions of a[i]/b[i]: each ratio
// compares two figures measured in the same repetition, so drift between
// repetitions (another job on the machine) cancels. The slices must have
// the same length; NaN ratios are left out, and none gives NaN.
func MedianRatio(a, b []float64) float64 {
	if len(a) != len(b) {
		panic("MedianRatio: slices of different lengths")
	}
	var rs []float64
	for i := range a {
		if r := Ratio(a[i], b[i]); !math.IsNaN(r) {
			rs = append(rs, r)
		}
	}
	return Median(rs)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
