package pools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// warmpod-pools status: each pool's pods by state, its target, floor and
// max, the controller's reason, and what its saved profile expects.
func TestViews(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 50, 0, 0, time.UTC) // a Tuesday
	golang := *basePool("golang", "golang:1.26")
	golang.Annotations[poolapi.AnnotationPolicy] = "- idle_count: 0\n  idle_time: 30m\n- periods: [\"* 8-17 * * mon-fri\"]\n  idle_count: 1\n  min: 1\n  max: 40"
	st := Status{Replicas: 3, Reason: "keep_alive", Message: "replicas 4 → 3: 1 idle (keep_alive)…", PodStart: 3.2, DecidedAt: now.Add(-90 * time.Second)}
	golang.Annotations[poolapi.AnnotationSizing] = mustJSON(t, st)
	var prof sizing.Profile
	monday11 := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	claims := make([]time.Time, 30)
	for i := range claims {
		claims[i] = monday11.Add(time.Duration(i) * time.Second)
	}
	prof.Fold(claims, 30*time.Second, monday11.Add(-time.Hour), now)
	golang.Annotations[poolapi.AnnotationProfile] = prof.Marshal()
	golang.Spec.Replicas = new(int32(3))
	manual := *poolDeployment("manual", "", 2)
	bad := *poolDeployment("bad", "- idle_count: -1", 1)
	found := *basePool("auto-python-3-12-1a2b3c4d", "python:3.12")
	found.Annotations[poolapi.AnnotationFoundFrom] = "python:3.12"
	found.Annotations[poolapi.AnnotationProfile] = "not base64!"
	delete(found.Annotations, poolapi.AnnotationDefaultPool)

	var pods []corev1.Pod
	for i, s := range []string{"idle", "idle", "starting", "busy", "busy"} {
		p := idlePod("golang", fmt.Sprint("g", i), s == "idle", now.Add(-time.Hour))
		if s == "busy" {
			p = claimedPod("golang", fmt.Sprint("g", i), now.Add(-time.Minute))
		}
		pods = append(pods, *p)
	}
	pending := idlePod("golang", "unscheduled", false, now)
	pending.Spec.NodeName = ""
	pods = append(pods, *pending)

	views := Views([]appsv1.Deployment{manual, golang, bad, found}, pods, now)
	require.Len(t, views, 4)
	assert.Equal(t, []string{"auto-python-3-12-1a2b3c4d", "bad", "golang", "manual"}, []string{views[0].Name, views[1].Name, views[2].Name, views[3].Name})
	g := views[2]
	assert.Equal(t, View{Name: "golang", Image: "golang:1.26", Replicas: 3, Idle: 2, Starting: 1, Pending: 1, Busy: 2,
		Floor: 1, Max: 40, IdleCount: 1, Period: 1, Policy: g.Policy, Status: st, Coming: g.Coming}, g)
	require.NotEmpty(t, g.Coming)
	assert.Equal(t, 30, g.Coming[0].Pods)
	assert.Contains(t, g.Coming[0].Why, "pre-warming 30 for Tue 11:00 UTC, seen on 1 of the last 1 weekday")
	assert.NotEmpty(t, views[1].PolicyErr)
	assert.Equal(t, "python:3.12", views[0].FoundFrom)
	assert.NotEmpty(t, views[0].ProfileErr)

	WithClaims(views, []RecentClaims{
		{Pool: "golang", Hour: ClaimWindow{Warm: 18, Cold: 1, WaitP50Secs: 0.1, WaitP95Secs: 8.5},
			Day: ClaimWindow{Warm: 22, Cold: 2, WaitP50Secs: 0.08, WaitP95Secs: 8.5}, Since: now.Add(-2 * time.Hour)},
		{Pool: "manual", Since: now.Add(-48 * time.Hour)},
		{Pool: "gone", Hour: ClaimWindow{Warm: 1}},
	})
	require.NotNil(t, views[2].Claims)
	assert.Nil(t, views[1].Claims, "a pool the controller counted no claim of")

	var b bytes.Buffer
	require.NoError(t, RenderViews(&b, views, now))
	out := b.String()
	for _, want := range []string{
		"POOL ", "golang  ", "keep_alive", "1m30s ago",
		"period 1: idle_count 1, min 1",
		"learned: pre-warming 30 for Tue 11:00 UTC",
		"manual:\n  no warmpod.dev/policy: the controller leaves its size alone",
		"warmpod.dev/policy does not read, the pool keeps its size: ",
		"made by the controller for python:3.12",
		"the saved profile does not read (the controller learns anew)",
		"pod start (measured): 3.2 s",
		"  claims, last hour: 18 of 19 warm (95 %), wait p50 0.10 s, p95 8.50 s; last day: 22 of 24 warm (92 %), wait p50 0.08 s, p95 8.50 s (counted since the controller took the lead, 2h0m0s ago)\n",
		"  claims, last hour: no claim; last day: no claim\n",
	} {
		assert.Contains(t, out, want)
	}
	t.Log("\n" + out)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A trickle keeps its pod over a stretch of hours, its forecast's time
// moving on with each slot: the view names the stretch once, from its
// first job, not once per slot.
func TestComingNamesATrickleOnce(t *testing.T) {
	tue := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	var claims []time.Time
	for h := 8; h < 18; h++ {
		for _, m := range []int{10, 30, 50} {
			claims = append(claims, tue.Add(time.Duration(h)*time.Hour+time.Duration(m)*time.Minute))
		}
	}
	var prof sizing.Profile
	prof.Fold(claims, 30*time.Second, tue, tue.Add(24*time.Hour))
	got := coming(&prof, tue.Add(24*time.Hour+7*time.Hour))
	// The stretch, then the last job's slot, whose own level is all
	// that is left of the trickle within the hour before it.
	require.Len(t, got, 2, "%+v", got)
	assert.True(t, got[0].Trickle)
	assert.False(t, got[1].Trickle)
	assert.Equal(t, tue.Add(24*time.Hour+17*time.Hour+50*time.Minute), got[1].At)
	assert.Equal(t, tue.Add(24*time.Hour+8*time.Hour+10*time.Minute), got[0].At, "from 08:10, the first job")
	assert.Contains(t, got[0].Why, "keeping 1 for a trickle")
}

// Text from annotations reaches the terminal escaped, and a decision time
// after now or long ago is shown as a date (the hostile trial's sizing
// annotation cleared the screen and added rows to the table).
func TestStatusTextIsPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"replicas 4 → 3: 1 idle", "replicas 4 → 3: 1 idle"},
		{"\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"\x1b]0;title\a", `\x1b]0;title\a`},
		{"a\tb\nfake-pool  1  2", `a\tb\nfake-pool  1  2`},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"\u009b31m", `\u009b31m`},
	} {
		assert.Equal(t, c.want, printable(c.in), "%q", c.in)
	}
	now := monday9
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-90 * time.Second), "1m30s ago"},
		{now.Add(30 * time.Second), "0s ago"},
		{time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), "in the future: 2099-01-01T00:00:00Z"},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), "0001-01-01"},
	} {
		assert.Equal(t, c.want, ago(c.at, now))
	}
	st := Status{Reason: "demand\x1b[2J", Message: "m\nPOOL x", DecidedAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}
	var b bytes.Buffer
	require.NoError(t, RenderViews(&b, []View{{Name: "p", Image: "i", Policy: "- idle_count: 1", Status: st, Period: -1, Max: sizing.NoMax}}, now))
	assert.NotContains(t, b.String(), "\x1b")
	assert.Contains(t, b.String(), `last change: m\nPOOL x`)
	assert.Contains(t, b.String(), "in the future: 2099-01-01T00:00:00Z")
}
