package sizing

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// A Profile is one pool's demand learned over time, so that a pipeline that
// runs at 11:00 every weekday finds warm pods at 11:00 without a period
// written for it (issue 41). It is a histogram of arrivals by time, as
// Shahrad et al. keep per application to pre-warm serverless functions
// ("Serverless in the Wild", USENIX ATC 2020), cut in slots of ProfileSlot:
//
//   - a weekly series, one level per slot of the week (Monday 11:00–11:05),
//     which learns what recurs on one day of the week;
//   - two daily series, one level per slot of the day, one for weekdays and
//     one for weekends, which learn what recurs every (week)day from a
//     single day: a new daily pipeline is warm on its second day, not its
//     second week.
//
// What a slot observes is its peak: the most claims (warm and cold) that
// arrived within one pod start time, ending in the slot (the demand term of
// Decide, per slot). A slot's level rises at once to a higher peak and falls
// towards a lower one by ProfileFall of the gap per occurrence, so recent
// occurrences count most, one missed day does not forget a pipeline, and a
// one-off burst is forgotten within a few occurrences.
//
// Times are read in UTC: the controller's pod has no zone of its own. A
// pipeline scheduled in a zone with daylight saving time moves by an hour
// twice a year; the daily series learns the new hour the next day.
//
// Everything is pure: Fold and Forecast take the time as an argument. The
// controller keeps one Profile per pool and persists it with Marshal in the
// pool's AnnotationProfile (docs/decisions/0007-learned-demand.md).
type Profile struct {
	// since is the first slot folded (a slot index: Unix time / ProfileSlot),
	// through the slot after the last one folded; both 0 when nothing was.
	since, through int64
	week           [slotsPerWeek]series
	day            [2][slotsPerDay]series // [0] weekdays, [1] weekends
}

// ProfileSlot is the width of a Profile's slots. Five minutes is finer than
// the minute a cron schedule starts a pipeline at plus the time its jobs take
// to reach the runner, and a week of slots (2,016) stays small.
const ProfileSlot = 5 * time.Minute

// ProfileFall is how much of the gap between a slot's level and a lower peak
// the level keeps at each occurrence, as 1/ProfileFall: a quarter. 30 pods
// the pipeline needed, then days it did not come: 7.5, 1.9, 0.5, 0.1
// (forecast as 8, 2, 1, 0 pods).
const ProfileFall = 4

// MaxProfilePeak caps a slot's peak, in pods: a level is kept in tenths of a
// pod in 16 bits, so that a profile is 10 KiB of memory (1,000 pools: 10
// MiB of the controller's 128 MiB). A burst of more than 6,500 jobs within
// one pod start on one pool is beyond what one namespace's budget holds.
const MaxProfilePeak = math.MaxUint16 / 10

// MaxProfileBytes bounds a marshalled Profile (and what Unmarshal reads): a
// pool with demand in every slot of the week is about 17 KiB; Kubernetes
// allows 256 KiB for all the annotations of an object.
const MaxProfileBytes = 32 << 10

const (
	slotsPerDay  = int64(24 * time.Hour / ProfileSlot)
	slotsPerWeek = 7 * slotsPerDay
	// epochMonday is the slot index of a Monday 00:00 UTC (1970-01-05), so
	// that the slot of the week counts from Monday, as GitLab's periods and
	// ISO 8601 do.
	epochMonday = int64(4 * 24 * time.Hour / ProfileSlot)
	// historyBits is how many occurrences a series remembers as hit or miss.
	historyBits = 8
)

// series is one slot's learning: its level in tenths of a pod and whether
// each of its last occurrences had demand (bit 0 the latest).
type series struct {
	level uint16
	hits  uint8
}

// fold adds one occurrence whose peak was v pods, and reports whether the
// series changed.
func (s *series) fold(v int) bool {
	before := *s
	t := uint16(min(max(v, 0), MaxProfilePeak) * 10)
	if t >= s.level {
		s.level = t
	} else {
		s.level = t + (s.level-t+ProfileFall/2)/ProfileFall
	}
	s.hits <<= 1
	if v > 0 {
		s.hits |= 1
	}
	return *s != before
}

// slotOf is t's slot index.
func slotOf(t time.Time) int64 {
	return floorDiv(t.Unix(), int64(ProfileSlot/time.Second))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// slotTime is when slot i begins.
func slotTime(i int64) time.Time { return time.Unix(i*int64(ProfileSlot/time.Second), 0).UTC() }

// weekSlot, daySlot and dayClass place slot i in its week, its day, and its
// kind of day (0 a weekday, 1 Saturday or Sunday).
func weekSlot(i int64) int64 {
	w := (i - epochMonday) % slotsPerWeek
	if w < 0 {
		w += slotsPerWeek
	}
	return w
}
func daySlot(i int64) int64 { return weekSlot(i) % slotsPerDay }
func dayClass(i int64) int {
	if weekSlot(i)/slotsPerDay >= 5 {
		return 1
	}
	return 0
}

// Fold folds into p every slot that has ended by now and was not folded yet,
// from the claims (warm claims and cold starts of the pool, any order) and
// the window of one pod start. Slots that ended before known (when the
// caller began to see the pool's claims: the controller's start) are
// unknown, not slots without demand, and are skipped, as are slots more
// than a week old: what the controller did not see cannot teach it anything.
// It reports whether a level or a history changed: quiet slots folded over
// slots that never had demand teach nothing.
func (p *Profile) Fold(claims []time.Time, window time.Duration, known, now time.Time) (learned bool) {
	from, end := p.toFold(known, now)
	if from >= end {
		return false
	}
	ts := slices.Clone(claims)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	window = max(window, time.Second)
	for i := from; i < end; i++ {
		v := peak(ts, slotTime(i), slotTime(i+1), window)
		w := p.week[weekSlot(i)].fold(v)
		d := p.day[dayClass(i)][daySlot(i)].fold(v)
		learned = learned || w || d
	}
	if p.since == 0 {
		p.since = from
	}
	p.through = end
	return learned
}

// Due reports whether a Fold at now would fold a slot: most decisions
// come within a slot already folded, and need not gather the claims.
func (p *Profile) Due(known, now time.Time) bool {
	from, end := p.toFold(known, now)
	return from < end
}

// toFold is the slots [from, end) a Fold at now folds.
func (p *Profile) toFold(known, now time.Time) (from, end int64) {
	end = slotOf(now) // the slot now is in has not ended
	k := slotOf(known)
	if !slotTime(k).Equal(known) {
		k++ // the slot known is in was seen in part
	}
	return max(p.through, k, end-slotsPerWeek), end
}

// peak is the most claims of ts (sorted) within one window that ends in
// [from, to): a burst that straddles the slot's start counts whole in the
// slot of its last claim.
func peak(ts []time.Time, from, to time.Time, window time.Duration) int {
	best, lo := 0, 0
	for hi, t := range ts {
		if t.Before(from) || !t.Before(to) {
			continue
		}
		for !ts[lo].After(t.Add(-window)) {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Forecast is what the profile expects of one time.
type Forecast struct {
	// Pods is the idle pods to have Ready: the highest level of the slot
	// now is in and those that begin by now + lead + ProfileSlot, rounded
	// to the nearest pod. 0 = nothing expected.
	Pods int
	// At is when the slot that set Pods begins; Why says, for a person,
	// which series expects it and how often it came.
	At  time.Time
	Why string
	// Trickle is set when Pods is the one pod kept for a trickle of
	// claims spread over the next TrickleHorizon (trickle), not a slot's
	// level: At is then the first slot expected to bring one.
	Trickle bool
}

// Forecast returns what the profile expects from now until lead ahead (the
// pods' start time, so they are Ready when the jobs come) and one slot more
// (a pipeline at 11:00 has its jobs at the runner at 11:00:00, the first
// second of its slot). So pods wait for a recurring burst from one pod
// start and five to ten minutes before it until its slot ends. Only what
// earlier days and weeks taught counts: the slot now is in is not folded
// yet, and a slot that ended is not asked for again, so today's own claims
// are left to the demand term and idle_time, as without a profile.
//
// A slot's expectation is the larger of its weekly level and its daily
// level, but the daily level does not count where the week already says
// it is wrong: the weekly slot has seen two occurrences or more without
// demand, and the daily slot's own history shows demand that did not
// come back the next day. So a Monday-only pipeline makes the daily series
// pre-warm Tuesday in its first two weeks, and then no more; a new daily
// pipeline is warm from its second day even in a pool that has run for
// months. Where no slot's level asks for more than one pod, a trickle of
// claims spread over the next TrickleHorizon keeps one (trickle).
func (p *Profile) Forecast(now time.Time, lead time.Duration) Forecast {
	var f Forecast
	if p.through == 0 {
		return f
	}
	first, last := slotOf(now), slotOf(now.Add(max(lead, 0)+ProfileSlot))
	for i := first; i <= last; i++ {
		n, why := p.expect(i)
		if n > f.Pods {
			f = Forecast{Pods: n, At: slotTime(i), Why: why}
		}
	}
	// A slot's level of one pod inside a trickle is the trickle's pod:
	// one reason for the whole stretch it is kept, not one per slot.
	if f.Pods <= 1 {
		if tr := p.trickle(first); tr.Pods > 0 {
			f = tr
		}
	}
	return f
}

// TrickleHorizon is how far ahead Forecast looks for a trickle: one pod is
// kept Ready while the slots of the next TrickleHorizon are expected to
// bring at least one claim between them. It is MaxKeepAlive, the longest a
// pod waits for a trickle's next job after its last claim, now from what
// the same hours of earlier days taught instead of from today's claims.
const TrickleHorizon = MaxKeepAlive

// trickle is Forecast's answer for a trickle, from slot first on for
// TrickleHorizon: one pod when the slots are expected to bring one claim
// or more, where each slot is expected to bring the share of its past
// occurrences that had a claim (the series expect reads: the daily one
// where it counts, else the weekly one). A trickle of a few jobs an hour
// peaks at one claim in a slot now and then, a level that rounds to no pod,
// so expect alone never pre-warms it: its first job of the morning and the
// ones after a gap longer than the keep-alive went cold every day. The same
// share, summed over an hour's slots (two or more of them), says a job is due within the hour, and that
// hour's pod is the keep-alive's own cost (Shahrad et al.'s pre-warming
// from the histogram, per time of day). A one-off claim adds at most the
// share of one slot, falling with each occurrence without it, so it keeps
// nothing; a trickle that stops keeps its pod less each day, and none once
// fewer than one claim an hour is left of its last eight days.
func (p *Profile) trickle(first int64) Forecast {
	end := first + int64(TrickleHorizon/ProfileSlot)
	var sum float64
	var at int64 = -1
	var why string
	slots := 0
	for i := first; i < end; i++ {
		share, kind := p.share(i)
		if share == 0 {
			continue
		}
		if at < 0 {
			at, why = i, kind
		}
		sum += share
		slots++
	}
	// One slot is a burst, not a trickle: its own level pre-warms it
	// (expect), one pod start ahead, not an hour.
	if sum < 1 || slots < 2 {
		return Forecast{}
	}
	return Forecast{Pods: 1, At: slotTime(at), Trickle: true, Why: fmt.Sprintf("keeping 1 for a trickle: %.1f claims expected from %s UTC within %s, as on the last %s",
		sum, slotTime(at).Format("Mon 15:04"), TrickleHorizon, why)}
}

// share is the part of slot i's past occurrences that had a claim, from
// the daily series where dailyCounts lets it count, else the weekly one,
// and which series that was; 0 when neither has seen an occurrence.
func (p *Profile) share(i int64) (float64, string) {
	w, d := p.week[weekSlot(i)], p.day[dayClass(i)][daySlot(i)]
	seenW, seenD := p.seen(i, prevWeek), p.seen(i, prevDay)
	if seenD > 0 && p.dailyCounts(w, d, seenW, seenD) {
		kind := "weekday"
		if dayClass(i) == 1 {
			kind = "weekend day"
		}
		return float64(ones(d.hits, seenD)) / float64(seenD), counted(seenD, kind)
	}
	if seenW == 0 {
		return 0, ""
	}
	return float64(ones(w.hits, seenW)) / float64(seenW), counted(seenW, "week")
}

// expect is slot i's expectation in pods, and which series gave it.
func (p *Profile) expect(i int64) (int, string) {
	w, d := p.week[weekSlot(i)], p.day[dayClass(i)][daySlot(i)]
	wn, dn := roundPods(w.level), roundPods(d.level)
	seenW, seenD := p.seen(i, prevWeek), p.seen(i, prevDay)
	at := slotTime(i).Format("Mon 15:04")
	if dn > 0 && dn >= wn && p.dailyCounts(w, d, seenW, seenD) {
		kind := "weekday"
		if dayClass(i) == 1 {
			kind = "weekend day"
		}
		return dn, fmt.Sprintf("pre-warming %d for %s UTC, seen on %d of the last %s", dn, at, ones(d.hits, seenD), counted(seenD, kind))
	}
	if wn == 0 {
		return 0, ""
	}
	return wn, fmt.Sprintf("pre-warming %d for %s UTC, seen %d of the last %s", wn, at, ones(w.hits, seenW), counted(seenW, "week"))
}

// counted is "n noun", the noun plural unless n is 1 ("1 week", "3 weekend
// days"): the reasons are read by people (Events, warmpod-pools status).
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// dailyCounts is Forecast's rule for whether a slot's daily level counts.
func (p *Profile) dailyCounts(w, d series, seenW, seenD int) bool {
	weekSaysNo := seenW >= 2 && w.hits&mask(seenW) == 0
	// Demand one day and none the next: bit k set and bit k-1 (the day
	// after) clear, for some k ≥ 1 (bit 0 is the latest occurrence).
	h := d.hits & mask(seenD)
	notDaily := (h>>1)&^h != 0
	return !weekSaysNo || !notDaily
}

// seen is how many occurrences of slot i's series came before i and were
// folded, up to historyBits. prev steps back one occurrence.
func (p *Profile) seen(i int64, prev func(int64) int64) int {
	n := 0
	for j := prev(i); j >= p.since && n < historyBits; {
		if j < p.through {
			n++
		} else if k := (j - p.through) / slotsPerWeek; k > 0 {
			// Occurrences not folded yet teach nothing: skip them a week
			// at a time (the same slot of the same kind of day, on both
			// chains), so a profile folded long before i (a controller
			// down for months, or an annotation from 1970) costs the
			// weeks between, not a walk over every day of them.
			j -= k * slotsPerWeek
			continue
		}
		j = prev(j)
	}
	return n
}

// prevWeek is the same slot a week before; prevDay the same slot of the
// previous day of its kind: the day before, but from Monday back to Friday
// and from Saturday back to the Sunday before.
func prevWeek(i int64) int64 { return i - slotsPerWeek }
func prevDay(i int64) int64 {
	switch weekSlot(i) / slotsPerDay {
	case 0:
		return i - 3*slotsPerDay
	case 5:
		return i - 6*slotsPerDay
	}
	return i - slotsPerDay
}

func mask(n int) uint8 {
	if n >= historyBits {
		return 0xff
	}
	return uint8(1)<<n - 1
}

func ones(h uint8, n int) int { return bits.OnesCount8(h & mask(n)) }

// roundPods is a level in tenths as pods, to the nearest.
func roundPods(level uint16) int { return (int(level) + 5) / 10 }

// Through is the end of the last slot folded (zero when none was).
func (p *Profile) Through() time.Time {
	if p.through == 0 {
		return time.Time{}
	}
	return slotTime(p.through)
}

// Empty reports whether p has learned nothing (no slot folded).
func (p *Profile) Empty() bool { return p.through == 0 }

// profileVersion is the first byte of a marshalled Profile.
const profileVersion = 1

// Marshal encodes p for an annotation: base64 of a version byte, since and
// through, then each series that has a level or a hit (a slot index gap, the
// level in tenths of a pod, the hits), weekly first. Slots without demand
// are not written, so a quiet pool's profile is a few bytes.
func (p *Profile) Marshal() string {
	b := []byte{profileVersion}
	b = binary.AppendUvarint(b, uint64(max(p.since, 0)))
	b = binary.AppendUvarint(b, uint64(max(p.through, 0)))
	table := func(ss []series) {
		var n uint64
		for _, s := range ss {
			if s.level > 0 || s.hits != 0 {
				n++
			}
		}
		b = binary.AppendUvarint(b, n)
		last := -1
		for i, s := range ss {
			if s.level == 0 && s.hits == 0 {
				continue
			}
			b = binary.AppendUvarint(b, uint64(i-last))
			b = binary.AppendUvarint(b, uint64(s.level))
			b = append(b, s.hits)
			last = i
		}
	}
	table(p.week[:])
	table(p.day[0][:])
	table(p.day[1][:])
	return base64.RawStdEncoding.EncodeToString(b)
}

// UnmarshalProfile decodes what Marshal wrote. Errors: the text is longer
// than MaxProfileBytes, not base64, of another version, or cut or padded.
func UnmarshalProfile(text string) (Profile, error) {
	var p Profile
	if len(text) > MaxProfileBytes {
		return p, fmt.Errorf("profile: %d bytes, more than %d", len(text), MaxProfileBytes)
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return p, fmt.Errorf("profile: not base64: %w", err)
	}
	if len(b) == 0 || b[0] != profileVersion {
		return p, errors.New("profile: not version 1")
	}
	r := b[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	since, ok1 := uv()
	through, ok2 := uv()
	const maxSlot = math.MaxInt64 / int64(ProfileSlot)
	if !ok1 || !ok2 || since > through || through > uint64(maxSlot) {
		return Profile{}, errors.New("profile: bad header")
	}
	p.since, p.through = int64(since), int64(through)
	for _, ss := range [][]series{p.week[:], p.day[0][:], p.day[1][:]} {
		n, ok := uv()
		if !ok || n > uint64(len(ss)) {
			return Profile{}, errors.New("profile: bad table length")
		}
		i := -1
		for range n {
			gap, ok := uv()
			lv, ok2 := uv()
			if !ok || !ok2 || gap == 0 || gap > uint64(len(ss)) || i+int(gap) >= len(ss) || lv > MaxProfilePeak*10 || len(r) == 0 {
				return Profile{}, errors.New("profile: bad entry")
			}
			i += int(gap)
			ss[i] = series{level: uint16(lv), hits: r[0]}
			r = r[1:]
		}
	}
	if len(r) != 0 {
		return Profile{}, errors.New("profile: trailing bytes")
	}
	return p, nil
}
