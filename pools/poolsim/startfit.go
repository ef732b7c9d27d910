package poolsim

import (
	"math"
	"slices"
	"time"
)

// A StartSample is one pod a cluster made: when, and when it became Ready
// (zero: never) or was deleted (zero: neither seen).
type StartSample struct {
	Made, Ready, Gone time.Time
}

// StartModel is Config's model of pod starts: a log-normal start
// (PodStartMedian, PodStartP95) plus PodStartPerStarting for each pod
// starting when the pod is made.
type StartModel struct {
	Median, P95, PerStarting time.Duration
	// Pods is how many Ready pods the model was fitted to.
	Pods int
}

// Apply sets cfg's start model to m.
func (m StartModel) Apply(cfg *Config) {
	cfg.PodStartMedian, cfg.PodStartP95, cfg.PodStartPerStarting = m.Median, m.P95, m.PerStarting
}

// FitStarts fits a StartModel to a cluster's pods: PerStarting by least
// squares of each Ready pod's start (Made to Ready) on the number of pods
// starting when it was made (made before it, and neither Ready nor gone
// by then), never below zero; then Median and P95 of what is left of each
// start once that share is taken off (at least a millisecond). The
// cluster's pods that start together slow each other where its cores are
// the limit (kube-e2e's two), which one log-normal of all its starts
// does not model: there, a pod made alone would start as slowly as one
// made into a crowd. Without two Ready pods made at different crowds,
// PerStarting is 0 and the log-normal is the starts' own.
func FitStarts(samples []StartSample) StartModel {
	var n, d []float64
	for i, s := range samples {
		if s.Ready.IsZero() || s.Ready.Before(s.Made) {
			continue
		}
		crowd := 0
		for j, o := range samples {
			if j == i || !o.Made.Before(s.Made) {
				continue
			}
			end := o.Ready
			if end.IsZero() || (!o.Gone.IsZero() && o.Gone.Before(end)) {
				end = o.Gone
			}
			if end.IsZero() || end.After(s.Made) {
				crowd++
			}
		}
		n = append(n, float64(crowd))
		d = append(d, s.Ready.Sub(s.Made).Seconds())
	}
	m := StartModel{Pods: len(d)}
	if len(d) == 0 {
		return m
	}
	per, _ := fitLine(n, d)
	left := make([]time.Duration, len(d))
	for i := range d {
		left[i] = max(time.Duration((d[i]-per*n[i])*float64(time.Second)), time.Millisecond)
	}
	slices.Sort(left)
	// The nearest-rank percentile, as make bench-pools reports starts.
	at := func(p float64) time.Duration { return left[max(int(math.Ceil(p*float64(len(left))))-1, 0)] }
	m.Median, m.P95 = at(0.5), at(0.95)
	m.PerStarting = time.Duration(per * float64(time.Second))
	return m
}

// fitLine fits d = base + per×n by least squares with per and base at
// least 0 (a crowd that speeds things up is noise, not a model; so is a
// negative lag), and returns per and base: where the free fit's base is
// below 0, the line through the origin. Without two values of n, per is 0
// and base the mean of d.
func fitLine(n, d []float64) (per, base float64) {
	var mn, md float64
	for i := range n {
		mn += n[i]
		md += d[i]
	}
	mn /= float64(len(n))
	md /= float64(len(d))
	var cov, vr float64
	for i := range n {
		cov += (n[i] - mn) * (d[i] - md)
		vr += (n[i] - mn) * (n[i] - mn)
	}
	if vr > 0 {
		per = max(cov/vr, 0)
	}
	if base = md - per*mn; base >= 0 {
		return per, base
	}
	var nd, nn float64
	for i := range n {
		nd += n[i] * d[i]
		nn += n[i] * n[i]
	}
	return max(nd/nn, 0), 0 // nn > 0: base < 0 needs per > 0, so vr > 0
}
