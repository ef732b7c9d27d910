//go:build kube

package kubee2e

// The warmpod-pools mode's policies: written in the day's own time, with
// cron periods, as a user would write them, and replayed at the trace's
// compression. The controller reads its policy with the wall clock, and a
// cron period's resolution (one minute) is 2.5 hours of the compressed day,
// so the controller cannot match these crons itself during a replay.
// Instead the harness evaluates each policy with sizing.Policy.Active at the
// day time a replay second stands for, and whenever a pool's active period
// changes it writes that period alone, its durations divided by
// pbCompression, as the pool's warmpod.dev/policy. The controller sees a
// policy change (its informer), parses it and re-decides: the same sizes a
// cron period would give at those moments, with the cron matching itself
// covered by package sizing's tests.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// pbDayPolicies are the pools' policies in the day's time (UTC; the trace's
// Monday is 2026-11-30). Each keeps nothing at night and at the weekend
// (the first period: idle_count 0, GitLab's default of an always-matching
// first policy), and a working-day period (07:30-19:00, Monday to Friday)
// with the pool's own idle_count: 2 for alpine, the busiest pool (a job
// every 7.5 minutes at its peak), 1 for the others, each with a max so
// that demand borrows a little, not the whole budget. idle_time is about
// three of the pool's mean gaps between jobs at its peak rate (so a gap
// that long is rare by day), as before schedules were replayed.
//
// golang has a third period for the pipeline, a scheduled pipeline of 30
// jobs at 11:00 on weekdays: from 10:25 to 11:04 it keeps 28 idle pods (24
// is 0.8 × 30; the pool's own day jobs, one a few seconds before the
// pipeline and one during it, claim from the same pods). A period is how
// GitLab's autoscaler meets a load known in advance; no demand rule can
// make warm a burst whose 30 jobs arrive within one pod start. It ends
// after the pipeline's last job has arrived, since a period that ends
// marks the pool's surplus idle pods retiring, unclaimable.
var pbDayPolicies = map[string]string{
	"alpine": `- idle_count: 0
  idle_time: 22m30s
- periods: ["30-59 7 * * mon-fri", "* 8-18 * * mon-fri"]
  idle_count: 2
  idle_time: 22m30s
  max: 4
`,
	"golang": `- idle_count: 0
  idle_time: 45m
- periods: ["30-59 7 * * mon-fri", "* 8-18 * * mon-fri"]
  idle_count: 1
  idle_time: 45m
  max: 4
- periods: ["25-59 10 * * mon-fri", "0-4 11 * * mon-fri"]
  idle_count: 28
  idle_time: 45m
  max: 28
`,
	"node": `- idle_count: 0
  idle_time: 1h30m
- periods: ["30-59 7 * * mon-fri", "* 8-18 * * mon-fri"]
  idle_count: 1
  idle_time: 1h30m
  max: 3
`,
}

// pbBudget is the namespace's idle budget: what the policies' largest
// moment needs (golang's pipeline period 28, alpine's and node's day 2 and
// 1) and one more, so demand may borrow a little above the schedule,
// never without bound.
var pbBudget = sizing.Budget{Pods: 32}

// pbMonday and pbSaturday are the day times that replay second 0 and the
// weekend hour's first second (pbWeekendAt) stand for (bench/cmd/poolstrace).
var (
	pbMonday   = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	pbSaturday = time.Date(2026, 12, 5, 9, 30, 0, 0, time.UTC)
)

// pbWeekendAt is the replay second where the weekend hour begins.
const pbWeekendAt = 576 * time.Second

// pbDayTime is the time of the day that replay time r stands for.
func pbDayTime(r time.Duration) time.Time {
	if r >= pbWeekendAt {
		return pbSaturday.Add((r - pbWeekendAt) * pbCompression)
	}
	return pbMonday.Add(r * pbCompression)
}

// pbPolicyChange is one write of a pool's compressed policy during the
// replay: at replay time at (0 = the Deployment's initial annotation).
type pbPolicyChange struct {
	at     time.Duration
	pool   string
	period int
	text   string
}

// pbCompress is one period as a policy of its own, always active, its
// durations divided by pbCompression.
func pbCompress(per sizing.Period) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- idle_count: %d\n  idle_time: %s\n", per.IdleCount, per.IdleTime/pbCompression)
	if per.Min > 0 {
		fmt.Fprintf(&b, "  min: %d\n", per.Min)
	}
	if per.Max != sizing.NoMax {
		fmt.Fprintf(&b, "  max: %d\n", per.Max)
	}
	if per.ScaleFactor > 0 {
		fmt.Fprintf(&b, "  scale_factor: %g\n  scale_factor_limit: %d\n", per.ScaleFactor, per.ScaleFactorLimit)
	}
	if per.MaxGrowthRate > 0 {
		fmt.Fprintf(&b, "  max_growth_rate: %d\n", per.MaxGrowthRate)
	}
	return b.String()
}

// pbSchedule is every change of a pool's active period over the replay,
// found by evaluating its day policy every 100 ms of replay (15 s of the
// day; a cron period's resolution is a minute), in time order.
func pbSchedule(t *testing.T, horizon time.Duration) []pbPolicyChange {
	t.Helper()
	pol := map[string]sizing.Policy{}
	for _, name := range pbPoolNames() {
		p, err := sizing.Parse(pbDayPolicies[name])
		require.NoError(t, err, "the day policy of %s", name)
		pol[name] = p
	}
	last := map[string]int{}
	var out []pbPolicyChange
	for r := time.Duration(0); r <= horizon; r += 100 * time.Millisecond {
		for _, name := range pbPoolNames() {
			idx, per := pol[name].Active(pbDayTime(r))
			if prev, ok := last[name]; ok && prev == idx {
				continue
			}
			last[name] = idx
			out = append(out, pbPolicyChange{at: r, pool: name, period: idx, text: pbCompress(per)})
		}
	}
	return out
}

// pbInitialPolicy is pool name's compressed policy at replay time 0.
func pbInitialPolicy(sched []pbPolicyChange, name string) string {
	for _, c := range sched {
		if c.at == 0 && c.pool == name {
			return c.text
		}
	}
	return ""
}

// pbApplySchedule writes each change after replay time 0 at t0 + its time
// (a merge patch of the Deployment's annotation) until ctx ends, and
// returns how late each write was made, by change index; the returned func
// waits for it to finish.
func pbApplySchedule(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, t0 time.Time, sched []pbPolicyChange) (late []time.Duration, wait func()) {
	late = make([]time.Duration, len(sched))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, c := range sched {
			if c.at == 0 {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(t0.Add(c.at))):
			}
			late[i] = time.Since(t0.Add(c.at))
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, poolapi.AnnotationPolicy, c.text)
			if _, err := cs.AppsV1().Deployments(ns).Patch(ctx, c.pool, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("the policy of %s at replay %s: %v", c.pool, c.at, err)
			}
		}
	}()
	return late, func() { <-done }
}
