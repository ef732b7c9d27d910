package main

import (
	"math"
	"sort"
)

// median of xs (NaN when empty).
func median(xs []float64) float64 { return pct(xs, 50) }

// pct is the p-th percentile, nearest-rank method (p in (0,100]).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if p >= 100 {
		return s[len(s)-1]
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return s[rank-1]
}

// mean of xs (NaN when empty).
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := math.NaN()
	for _, x := range xs {
		if math.IsNaN(m) || x > m {
			m = x
		}
	}
	return m
}

func countAbove(xs []float64, lim float64) int {
	n := 0
	for _, x := range xs {
		if x > lim {
			n++
		}
	}
	return n
}
