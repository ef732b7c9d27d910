package main

import (
	"bytes"
	"os"
	"testing"
)

// The committed trace is what the generator writes: a change to either
// shows here (regenerate with `go run ./cmd/poolstrace > pools-trace.csv`).
func TestCommittedTraceIsGenerated(t *testing.T) {
	want, err := os.ReadFile("../../pools-trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := write(&got, generate()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("bench/pools-trace.csv is not what bench/cmd/poolstrace writes: regenerate it")
	}
}

// The committed history is what the generator writes
// (`go run ./cmd/poolstrace -history > pools-history.csv`).
func TestCommittedHistoryIsGenerated(t *testing.T) {
	want, err := os.ReadFile("../../pools-history.csv")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := writeHistory(&got, history()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatal("bench/pools-history.csv is not what bench/cmd/poolstrace -history writes: regenerate it")
	}
}

// The history is the week before the trace, with a pipeline each weekday.
func TestHistoryShape(t *testing.T) {
	count := map[string]int{}
	for _, j := range history() {
		if j.at.Before(historyStart) || !j.at.Before(historyStart.AddDate(0, 0, 7)) {
			t.Errorf("%s job at %s: outside the week before the trace", j.kind, j.at)
		}
		count[j.kind]++
		if j.kind == "pipeline" && (j.at.Hour() != 11 || j.at.Minute() > 5) {
			t.Errorf("pipeline job at %s: want 11:00-11:05", j.at)
		}
	}
	if count["pipeline"] != 5*30 || count["nightly"] != 5 || count["weekend"] != 6 {
		t.Errorf("jobs by kind %v: want 150 pipeline, 5 nightly, 6 weekend", count)
	}
}

// The trace has what bench/pools.md says it has.
func TestTraceShape(t *testing.T) {
	jobs := generate()
	count := map[string]int{}
	var first, last float64 = -1, 0
	for i, j := range jobs {
		if i > 0 && j.at < jobs[i-1].at {
			t.Fatalf("job %d arrives before job %d", i+1, i)
		}
		if j.hold < 3 || j.hold > 60 {
			t.Errorf("job %d holds its pod %g s: want seconds to a minute", i+1, j.hold)
		}
		count[j.kind]++
		if j.kind == "day" {
			count[j.pool]++
		}
		if j.kind == "pipeline" {
			if first < 0 {
				first = j.at
			}
			last = j.at
		}
		if (j.kind == "day" || j.kind == "pipeline") && (j.at < 36 || j.at >= 312) {
			t.Errorf("job %d (%s) at %g s: outside 07:30-19:00", i+1, j.kind, j.at)
		}
	}
	for _, c := range []struct {
		what string
		want int
	}{{"pipeline", 30}, {"nightly", 1}, {"weekend", 5}} {
		if count[c.what] != c.want {
			t.Errorf("%s jobs: %d, want %d", c.what, count[c.what], c.want)
		}
	}
	for _, p := range pools {
		if n, e := float64(count[p.name]), expected(p); n < 0.9*e || n > 1.1*e {
			t.Errorf("pool %s: %g day jobs, want %g ± 10 %%", p.name, n, e)
		}
	}
	if last-first > 2 {
		t.Errorf("the pipeline's jobs arrive over %g s, want within 2 s", last-first)
	}
}
