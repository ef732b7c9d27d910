package gitlab

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// Span is one timed step of a driver call in its --timings line (the
// benchmark's breakdown of a job: the client set-up, each API call, each
// exec), from Start to End in Unix nanoseconds.
type Span struct {
	Name  string `json:"name"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// Span records that step name of this call ran from start until now. It
// records nothing without Cfg.Timings; it may be called from several
// goroutines (a stage's cancel runs beside its stream).
func (d *Driver) Span(name string, start time.Time) {
	if d.Cfg.Timings == "" {
		return
	}
	end := d.Now()
	d.spansMu.Lock()
	d.spans = append(d.spans, Span{Name: name, Start: start.UnixNano(), End: end.UnixNano()})
	d.spansMu.Unlock()
}

// timed returns cl with each call recorded as a Span (cl itself without
// Cfg.Timings).
func (d *Driver) timed(cl session.Cluster) session.Cluster {
	if d.Cfg.Timings == "" || cl == nil {
		return cl
	}
	return &timedCluster{Cluster: cl, d: d}
}

// timedAttach wraps a Core's Attach: the multiplexer's handover is a
// Span, and the job start through it is timed too.
func (d *Driver) timedAttach(att func(poolapi.Pod) (session.Cluster, func(bool))) func(poolapi.Pod) (session.Cluster, func(bool)) {
	if d.Cfg.Timings == "" || att == nil {
		return att
	}
	return func(pod poolapi.Pod) (session.Cluster, func(bool)) {
		t0 := d.Now()
		cl, release := att(pod)
		d.Span("multiplexer handover", t0)
		return d.timed(cl), release
	}
}

// timedCluster records each call of its Cluster as a Span of its driver.
type timedCluster struct {
	session.Cluster
	d *Driver
}

func (t *timedCluster) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	name := "exec"
	if len(argv) >= 3 {
		name += " " + strings.Join(argv[1:3], " ")
	}
	defer t.d.Span(name, t.d.Now())
	return t.Cluster.Exec(ctx, p, argv, stdin, stdout, stderr)
}

func (t *timedCluster) Delete(ctx context.Context, p poolapi.Pod) error {
	defer t.d.Span("delete pod", t.d.Now())
	return t.Cluster.Delete(ctx, p)
}

func (t *timedCluster) PodsOfJob(ctx context.Context, owner poolapi.Owner) ([]poolapi.Pod, error) {
	defer t.d.Span("list pods of job", t.d.Now())
	return t.Cluster.PodsOfJob(ctx, owner)
}
