package main

import "testing"

func TestTargetVs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lower   bool
		vals    map[string]float64
		ref     string
		k       float64
		target  string
		ratio   float64
		refName string
		met     bool
	}{
		{"lower met", true, map[string]float64{"warmpod": 12, "tini": 10}, "tini", 1.2, "≤ 1.2× tini", 1.2, "tini", true},
		{"lower not met", true, map[string]float64{"warmpod": 25, "tini": 10}, "tini", 2, "≤ 2× tini", 2.5, "tini", false},
		{"higher met", false, map[string]float64{"warmpod": 90, "tini": 100}, "tini", 0.8, "≥ 0.8× tini", 0.9, "tini", true},
		{"higher not met", false, map[string]float64{"warmpod": 50, "tini": 100}, "tini", 0.8, "≥ 0.8× tini", 0.5, "tini", false},
		{"best anchor", true, map[string]float64{"warmpod": 110, "tini": 120, "dumb-init": 100, "catatonit": 105}, "", 1.2, "≤ 1.2× best anchor", 1.1, "dumb-init", true},
	} {
		r := newRow("x", "inits", "x", "ms", tc.lower, "1")
		for n, v := range tc.vals {
			r.set(n, v)
		}
		r.targetVs(tc.ref, tc.k)
		if r.Target != tc.target || r.Met == nil || *r.Met != tc.met || r.TargetRatio == nil || *r.TargetRatio != tc.ratio || r.TargetRef != tc.refName {
			t.Errorf("%s: target %q met %v ratio %v ref %q", tc.name, r.Target, r.Met, r.TargetRatio, r.TargetRef)
		}
	}
	r := newRow("x", "inits", "x", "ms", true, "1")
	r.set("warmpod", 1)
	r.targetVs("tini", 2)
	if r.Target != "" || r.Met != nil {
		t.Errorf("no tini value: target %q met %v, want none", r.Target, r.Met)
	}
}

func TestEnvGOMAXPROCS(t *testing.T) {
	if v := envGOMAXPROCS(cleanEnv()); v != "unset" {
		t.Errorf("cleanEnv: %q", v)
	}
	if v := envGOMAXPROCS([]string{"GOMAXPROCS=2", "A=b", "GOMAXPROCS=1"}); v != "1" {
		t.Errorf("got %q, want the last one", v)
	}
}
