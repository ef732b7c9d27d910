package sizing

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// monday is a Monday, 00:00 UTC.
var monday = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// burst is n claims a second apart from at: a pipeline's jobs reaching the
// runner. Within the 30 s pod start of these tests, up to 30 of them count
// as one peak.
func burst(at time.Time, n int) []time.Time {
	ts := make([]time.Time, n)
	for i := range ts {
		ts[i] = at.Add(time.Duration(i) * time.Second)
	}
	return ts
}

// learner plays claims into a Profile as the controller does: a fold every
// minute with the claims of the last day (the tracker's history).
type learner struct {
	p      Profile
	claims []time.Time
	known  time.Time
	now    time.Time
}

func newLearner(start time.Time) *learner { return &learner{known: start, now: start} }

// until folds minute by minute up to t, with the claims that arrived by then.
func (l *learner) until(t time.Time, claims ...time.Time) {
	l.claims = append(l.claims, claims...)
	for ; !l.now.After(t); l.now = l.now.Add(time.Minute) {
		var recent []time.Time
		for _, c := range l.claims {
			if !c.After(l.now) && c.After(l.now.Add(-24*time.Hour)) {
				recent = append(recent, c)
			}
		}
		l.p.Fold(recent, 30*time.Second, l.known, l.now)
	}
}

// forecast is what the profile expects at t, a pod start of 30 s ahead.
func (l *learner) forecast(t time.Time) Forecast { return l.p.Forecast(t, 30*time.Second) }

func day(d int, hh, mm int) time.Time {
	return monday.AddDate(0, 0, d).Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)
}

// A pipeline of 30 jobs at 11:00 each weekday is warm from its second day,
// with no period written; the weekend and the other hours stay cold.
func TestProfileDailyPipelineWarmFromItsSecondDay(t *testing.T) {
	l := newLearner(monday)
	for d := range 12 {
		before := day(d, 10, 58)
		l.until(before)
		f := l.forecast(before)
		weekday := monday.AddDate(0, 0, d).Weekday() != time.Saturday && monday.AddDate(0, 0, d).Weekday() != time.Sunday
		switch {
		case d == 0:
			assert.Zero(t, f.Pods, "day 0: nothing learned yet")
		case weekday:
			assert.Equal(t, 30, f.Pods, "day %d (%s)", d, before.Weekday())
			assert.Equal(t, day(d, 11, 0), f.At)
			assert.Contains(t, f.Why, "pre-warming 30 for "+before.Format("Mon")+" 11:00 UTC")
		default:
			assert.Zero(t, f.Pods, "day %d (%s): no pipeline on weekends", d, before.Weekday())
		}
		assert.Zero(t, l.forecast(day(d, 15, 0)).Pods, "day %d: 15:00 has no demand", d)
		if weekday {
			l.until(day(d, 11, 2), burst(day(d, 11, 0), 30)...)
		}
	}
	assert.Contains(t, l.forecast(day(11, 10, 58)).Why, "seen on 8 of the last 8 weekdays")
}

// A Monday-only pipeline is warm from its second week. In its first two
// weeks the daily series pre-warms the days after each Monday, fewer pods
// each day (it could have been a daily pipeline); from the third week the
// weekly series has seen those days without it, and nothing else is
// pre-warmed.
func TestProfileWeeklyPipelineWarmFromItsSecondWeek(t *testing.T) {
	l := newLearner(monday)
	others := map[int]int{}
	for d := range 28 {
		before := day(d, 8, 58)
		l.until(before)
		f := l.forecast(before)
		switch wd := before.Weekday(); {
		case wd == time.Monday && d == 0:
			assert.Zero(t, f.Pods)
		case wd == time.Monday:
			assert.Equal(t, 20, f.Pods, "day %d", d)
			assert.Contains(t, f.Why, "week")
		case f.Pods > 0:
			others[d] = f.Pods
		}
		if before.Weekday() == time.Monday {
			l.until(day(d, 9, 2), burst(day(d, 9, 0), 20)...)
		}
	}
	assert.Equal(t, map[int]int{1: 20, 2: 5, 3: 1, 8: 20, 9: 5, 10: 1}, others, "pods pre-warmed at 08:58 on other days, by day")
}

// A trickle of three jobs an hour on weekdays, 08:10–17:50, never peaks
// above one claim in a slot, a level that pre-warms nothing, yet from its
// second day one pod is Ready ahead of its first job of the morning and
// kept through the day; nothing at night or on the weekend. Once it stops,
// the pod is kept while its last eight weekdays still make one claim an
// hour: five more weekdays, then none.
func TestProfileTrickleKeepsOnePod(t *testing.T) {
	l := newLearner(monday)
	var quietAtNoon []int
	for d := range 24 {
		weekday := monday.AddDate(0, 0, d).Weekday() != time.Saturday && monday.AddDate(0, 0, d).Weekday() != time.Sunday
		morning := day(d, 7, 50)
		l.until(morning)
		f := l.forecast(morning)
		switch {
		case d == 0 || !weekday:
			assert.Zero(t, f.Pods, "day %d 07:50", d)
		case d < 14:
			assert.Equal(t, 1, f.Pods, "day %d 07:50: ahead of the first job", d)
			assert.Equal(t, day(d, 8, 10), f.At, "day %d", d)
			assert.Contains(t, f.Why, "keeping 1 for a trickle", "day %d", d)
		}
		for h := 8; h < 18; h++ {
			for _, m := range []int{10, 30, 50} {
				at := day(d, h, m)
				l.until(at.Add(-time.Minute))
				if d > 0 && d < 14 && weekday {
					assert.Equal(t, 1, l.forecast(at.Add(-time.Minute)).Pods, "day %d %s: between jobs", d, at.Format("15:04"))
				}
				if d >= 14 && weekday && at.Equal(day(d, 12, 10)) && l.forecast(at.Add(-time.Minute)).Pods == 0 {
					quietAtNoon = append(quietAtNoon, d)
				}
				if d < 14 && weekday {
					l.until(at, at)
				}
			}
		}
		l.until(day(d, 20, 0))
		assert.Zero(t, l.forecast(day(d, 20, 0)).Pods, "day %d 20:00: nothing till the morning", d)
	}
	assert.Equal(t, []int{22, 23}, quietAtNoon, "the weekdays after it stopped on which no pod was kept at noon")
}

// A one-off burst in a pool that ran quiet for two weeks is pre-warmed for
// the next day and the same weekday of the next week (it could have been
// a daily or a weekly pipeline's first run), and at no other time: it does
// not leave a week of idle pods behind.
func TestProfileOneOffBurstIsForgotten(t *testing.T) {
	l := newLearner(monday)
	at := day(16, 14, 0) // a Wednesday, after two quiet weeks
	l.until(at.Add(-time.Minute))
	l.until(at.Add(2*time.Minute), burst(at, 30)...)
	podMinutes := map[int]int{}
	for m := at.Add(10 * time.Minute); m.Before(at.AddDate(0, 0, 15)); m = m.Add(time.Minute) {
		l.until(m)
		if f := l.forecast(m); f.Pods > 0 {
			podMinutes[int(m.Sub(at.Add(-time.Hour))/(24*time.Hour))] += f.Pods
		}
	}
	// Each pre-warm asks for the pods over the 10 minutes from five
	// minutes and one pod start before the slot to the slot's end. The
	// daily series then no longer counts (the week says that day is
	// quiet); the weekly level falls to a quarter each week.
	assert.Equal(t, map[int]int{1: 30 * 10, 7: 30 * 10, 14: 8 * 10}, withoutZeros(podMinutes), "pod-minutes by day after the burst")
}

func withoutZeros(m map[int]int) map[int]int {
	out := map[int]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// A profile survives a restart: what Marshal wrote reads back to the same
// forecasts, and the new process goes on learning from where it was.
func TestProfileSurvivesARestart(t *testing.T) {
	l := newLearner(monday)
	for d := range 9 {
		l.until(day(d, 11, 2), burst(day(d, 11, 0), 30)...)
	}
	l.until(day(9, 9, 0))
	text := l.p.Marshal()
	assert.Less(t, len(text), 200, "a profile with one recurring slot is small")
	back, err := UnmarshalProfile(text)
	require.NoError(t, err)
	for m := day(9, 9, 0); m.Before(day(16, 9, 0)); m = m.Add(5 * time.Minute) {
		require.Equal(t, l.p.Forecast(m, 30*time.Second), back.Forecast(m, 30*time.Second), "at %s", m)
	}
	assert.Equal(t, text, back.Marshal())
	// A new leader, an hour later, learns on.
	l2 := &learner{p: back, known: day(9, 10, 0), now: day(9, 10, 0)}
	l2.until(day(9, 11, 2), burst(day(9, 11, 0), 30)...)
	l2.until(day(10, 10, 58))
	assert.Equal(t, 30, l2.forecast(day(10, 10, 58)).Pods)
	assert.Contains(t, l2.forecast(day(10, 10, 58)).Why, "seen on 8 of the last 8 weekdays")
}

// Slots the controller did not see (it was not running, or not leading)
// are not misses: nothing is folded for them.
func TestProfileSkipsWhatItDidNotSee(t *testing.T) {
	var p Profile
	p.Fold(burst(day(0, 11, 0), 30), 30*time.Second, day(0, 12, 0), day(0, 13, 0))
	assert.Zero(t, p.Forecast(day(1, 10, 58), 30*time.Second).Pods, "the burst was before the controller knew the pool")
	assert.Equal(t, slotOf(day(0, 12, 0)), p.since)
	assert.Equal(t, slotOf(day(0, 13, 0)), p.through)
	// Down for two days: the next fold starts at the new known time, and
	// never folds more than a week.
	p.Fold(nil, 30*time.Second, day(2, 13, 0), day(2, 14, 0))
	assert.Equal(t, slotOf(day(0, 12, 0)), p.since)
	q := Profile{}
	q.Fold(nil, 30*time.Second, day(0, 0, 0), day(30, 0, 0))
	assert.Equal(t, slotOf(day(23, 0, 0)), q.since, "a fold covers a week at most")
	// A clock that went back folds nothing.
	q.Fold(burst(day(29, 0, 0), 5), 30*time.Second, day(0, 0, 0), day(29, 0, 0))
	assert.Equal(t, slotOf(day(30, 0, 0)), q.through)
}

func TestUnmarshalProfileRefuses(t *testing.T) {
	var good Profile
	good.Fold(burst(day(0, 11, 0), 3), 30*time.Second, day(0, 0, 0), day(0, 12, 0))
	ok := good.Marshal()
	for name, text := range map[string]string{
		"empty":         "",
		"not base64":    "!!!",
		"version 2":     "Ag",
		"cut":           ok[:len(ok)-2],
		"trailing":      ok + "AA",
		"too long":      strings.Repeat("A", MaxProfileBytes+1),
		"bad header":    "AQIB",    // since 2 > through 1
		"table too big": "AQAA/w8", // a week table of 2,047 entries: more than a week has slots
	} {
		t.Run(name, func(t *testing.T) {
			_, err := UnmarshalProfile(text)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "profile: "), err.Error())
		})
	}
}

// FuzzUnmarshalProfile: any text is refused or read; what is read marshals
// back to text that reads to the same profile, and forecasts without a panic.
func FuzzUnmarshalProfile(f *testing.F) {
	var p Profile
	p.Fold(burst(day(0, 11, 0), 30), 30*time.Second, day(0, 0, 0), day(3, 0, 0))
	f.Add(p.Marshal())
	f.Add("AQAAAAAA")
	f.Fuzz(func(t *testing.T, text string) {
		q, err := UnmarshalProfile(text)
		if err != nil {
			return
		}
		again, err := UnmarshalProfile(q.Marshal())
		require.NoError(t, err)
		require.Equal(t, q, again)
		_ = q.Forecast(day(3, 10, 58), time.Minute)
		q.Fold(nil, time.Minute, day(3, 0, 0), day(3, 1, 0))
	})
}

func TestCountedNamesOneInTheSingular(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "week", "1 week"},
		{2, "week", "2 weeks"},
		{0, "weekday", "0 weekdays"},
		{3, "weekend day", "3 weekend days"},
	} {
		assert.Equal(t, c.want, counted(c.n, c.noun))
	}
}

// seen skips the occurrences after the profile's last fold a week at a
// time, and counts as the plain walk does, on both chains.
func TestProfileSeenSkipsWhatWasNotFolded(t *testing.T) {
	naive := func(p *Profile, i int64, prev func(int64) int64) int {
		n := 0
		for j := prev(i); j >= p.since && n < historyBits; j = prev(j) {
			if j < p.through {
				n++
			}
		}
		return n
	}
	rng := rand.New(rand.NewPCG(41, 1))
	base := slotOf(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	for range 20_000 {
		since := base + rng.Int64N(6*slotsPerWeek)
		through := since + rng.Int64N(10*slotsPerWeek)
		i := through + rng.Int64N(20*slotsPerWeek) - slotsPerWeek
		p := &Profile{since: since, through: through}
		for _, prev := range []func(int64) int64{prevWeek, prevDay} {
			require.Equal(t, naive(p, i, prev), p.seen(i, prev), "since %d through %d i %d", since, through, i)
		}
	}
	// An annotation folded through 1970: a handful of steps, not one per
	// day since then (the hostile trial's 8 bytes cost 0.5 s of status).
	p := &Profile{since: 0, through: 1}
	assert.Equal(t, 0, p.seen(slotOf(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)), prevDay))
}
