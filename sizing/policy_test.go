package sizing

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// at is a UTC time for tests: 2026-03-02 is a Monday.
func at(day, hour, minute int) time.Time {
	return time.Date(2026, 3, day, hour, minute, 0, 0, time.UTC)
}

func mustParse(t *testing.T, text string) Policy {
	t.Helper()
	p, err := Parse(text)
	require.NoError(t, err)
	return p
}

func TestParseFields(t *testing.T) {
	p := mustParse(t, `
- idle_count: 0
  idle_time: 0s
- periods: ["* 8-15 * * mon-fri"]
  timezone: Europe/Berlin
  idle_count: 2
  idle_time: 30m
  min: 1
  max: 10
  scale_factor: 1.5
  scale_factor_limit: 8
  max_growth_rate: 5
`)
	require.Len(t, p, 2)
	assert.Equal(t, NoMax, p[0].Max, "an omitted max is no max")
	assert.Equal(t, time.Duration(0), p[0].IdleTime)
	w := p[1]
	assert.Equal(t, []string{"* 8-15 * * mon-fri"}, w.Periods)
	assert.Equal(t, "Europe/Berlin", w.Timezone)
	assert.Equal(t, 2, w.IdleCount)
	assert.Equal(t, 30*time.Minute, w.IdleTime)
	assert.Equal(t, 1, w.Min)
	assert.Equal(t, 10, w.Max)
	assert.InDelta(t, 1.5, w.ScaleFactor, 0)
	assert.Equal(t, 8, w.ScaleFactorLimit)
	assert.Equal(t, 5, w.MaxGrowthRate)

	// JSON is YAML: a program may write the annotation as JSON.
	j := mustParse(t, `[{"idle_count":0,"max":0,"idle_time":"1800s"}]`)
	assert.Equal(t, 0, j[0].Max, "an explicit max: 0 is kept")
	assert.Equal(t, 30*time.Minute, j[0].IdleTime)

	empty := mustParse(t, "[]")
	i, per := empty.Active(at(2, 3, 0))
	assert.Equal(t, -1, i)
	assert.Equal(t, DefaultPeriod(), per)
}

// TestParseErrors: every mistake is refused with the period's index and the
// key, and never with a panic.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text    string
		period        int
		field, detail string
	}{
		{"empty", "  \n", -1, "", "empty"},
		{"not a list", "idle_count: 1", -1, "", "list of periods"},
		{"scalar", "3", -1, "", "list of periods"},
		{"unquoted cron", "- periods: [* * * * *]", -1, "", "quote cron"},
		{"duplicate key", "- idle_count: 1\n  idle_count: 2", -1, "", "already"},
		{"null period", "- idle_count: 1\n-", 1, "", "empty period"},
		{"period not a mapping", "- 3", 0, "", "mapping"},
		{"unknown key", "- idle_count: 1\n- idle_cuont: 2", 1, "", `unknown key "idle_cuont"`},
		// encoding/json matches keys without case: MAX and Max would both
		// be max, past the refusal of a key written twice.
		{"key in capitals", "- idle_count: 0\n  MAX: 0\n  Max: 1", 0, "MAX", "keys are lower case: write max"},
		{"key in mixed case", "- Idle_Count: 1", 0, "Idle_Count", "write idle_count"},
		// Only the first document was read; the rest was dropped.
		{"a second document", "- idle_count: 0\n  max: 1\n---\n- idle_count: 50", -1, "", "more than one YAML document"},
		{"junk after the document's end", "- idle_count: 1\n...\ngarbage: [", -1, "", "more than one YAML document"},
		{"negative idle_count", "- idle_count: -1", 0, "idle_count", "outside 0..100000"},
		{"negative min", "- min: -2", 0, "min", "outside"},
		{"negative max", "- max: -1", 0, "max", "outside"},
		{"negative scale_factor", "- scale_factor: -0.5", 0, "scale_factor", "outside"},
		{"huge scale_factor", "- scale_factor: 1e9", 0, "scale_factor", "outside"},
		{"negative limit", "- scale_factor_limit: -1", 0, "scale_factor_limit", "outside"},
		{"negative growth", "- max_growth_rate: -5", 0, "max_growth_rate", "outside"},
		{"huge idle_count", "- idle_count: 100001", 0, "idle_count", "outside"},
		{"fractional count", "- idle_count: 1.5", 0, "idle_count", "whole number"},
		{"string count", `- idle_count: "two"`, 0, "idle_count", "whole number"},
		{"idle_count above max", "- idle_count: 1\n- idle_count: 5\n  max: 3", 1, "idle_count", "more than max (3)"},
		{"min above max", "- min: 4\n  max: 3", 0, "min", "more than max (3)"},
		{"bad idle_time", `- idle_time: "30 minutes"`, 0, "idle_time", "not a duration"},
		{"negative idle_time", `- idle_time: "-1m"`, 0, "idle_time", "not a duration"},
		{"number idle_time", `- idle_time: 1800`, 0, "idle_time", "want a string"},
		{"unknown timezone", "- timezone: Mars/Olympus", 0, "timezone", `unknown time zone "Mars/Olympus"`},
		{"Local timezone", "- timezone: Local", 0, "timezone", "depends on the host"},
		{"periods not a list", `- periods: "* * * * *"`, 0, "periods", "list of strings"},
		{"bad hour", `- periods: ["* * * * *", "* 25 * * *"]`, 0, "periods[1]", `hour "25": want 0..23 (end of range (25) above maximum (23)`},
		{"bad minute", `- periods: ["61 * * * *"]`, 0, "periods[0]", `minute "61": want 0..59`},
		{"bad day name", `- periods: ["* * * * mon-fry"]`, 0, "periods[0]", "day of week"},
		{"a day of the week spelt out", `- periods: ["* 8-17 * * monday"]`, 0, "periods[0]", `day of week "monday": want mon or 1 (mon..sun`},
		{"a month spelt out", `- periods: ["* * * january *"]`, 0, "periods[0]", `month "january": want jan or 1 (jan..dec`},
		{"bad month", `- periods: ["* * * 13 *"]`, 0, "periods[0]", `month "13": want jan or 1`},
		{"zero step", `- periods: ["*/0 * * * *"]`, 0, "periods[0]", `minute "*/0": want 0..59 (step`},
		{"zero step on sunday range", `- periods: ["* * * * 1-7/0"]`, 0, "periods[0]", "day of week: step"},
		{"six fields", `- periods: ["0 * * * * *"]`, 0, "periods[0]", "6 fields"},
		{"four fields", `- periods: ["* * * *"]`, 0, "periods[0]", "4 fields"},
		{"seven fields with seconds", `- periods: ["0 * 9-17 * * mon-fri *"]`, 0, "periods[0]", "docker-machine"},
		{"never matches", `- periods: ["0 0 30 2 *"]`, 0, "periods[0]", "matches no minute"},
		{"TZ prefix", `- periods: ["TZ=UTC * * * *"]`, 0, "periods[0]", "character"},
		{"descriptor", `- periods: ["@daily"]`, 0, "periods[0]", "1 fields"},
		{"too long", "- idle_count: 1\n" + strings.Repeat("#", MaxPolicyBytes), -1, "", "bytes"},
		{"too many periods", strings.Repeat("- idle_count: 1\n", MaxPeriods+1), -1, "", "periods, more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.text)
			require.Error(t, err)
			assert.Nil(t, p)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%T: %v", err, err)
			assert.Equal(t, tc.period, fe.Period, err.Error())
			assert.Equal(t, tc.field, fe.Field, err.Error())
			assert.Contains(t, err.Error(), tc.detail)
			assert.True(t, strings.HasPrefix(err.Error(), "policy: "), err.Error())
		})
	}
}

// TestActive: the last matching period wins (GitLab's rule), in each period's
// own zone; no match is the default.
func TestActive(t *testing.T) {
	p := mustParse(t, `
- idle_count: 1
- periods: ["* 8-15 * * mon-fri"]
  idle_count: 2
- periods: ["* * * * sat,sun"]
  idle_count: 3
- periods: ["0-29 12 * * *"]
  timezone: Asia/Tokyo
  idle_count: 4
`)
	for _, tc := range []struct {
		name   string
		now    time.Time
		period int
	}{
		{"night on a weekday: only the catch-all", at(2, 1, 0), 0},
		{"monday 08:00", at(2, 8, 0), 1},
		{"monday 15:59:59", at(2, 15, 59).Add(59 * time.Second), 1},
		{"monday 16:00", at(2, 16, 0), 0},
		{"saturday 10:00: weekend after work hours", at(7, 10, 0), 2},
		{"12:00 in Tokyo is 03:00 UTC", at(3, 3, 0), 3},
		{"12:30 in Tokyo is past the range", at(3, 3, 30), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, per := p.Active(tc.now)
			assert.Equal(t, tc.period, i)
			assert.Equal(t, tc.period+1, per.IdleCount)
		})
	}

	none := mustParse(t, `- periods: ["* 8-15 * * mon-fri"]`+"\n  idle_count: 2")
	i, per := none.Active(at(2, 20, 0))
	assert.Equal(t, -1, i)
	assert.Equal(t, DefaultPeriod(), per)
}

// TestCronDialect: GitLab's day of week is 1-7 or MON-SUN with 0 = Sunday
// too; docker-machine's 7 fields are accepted with * seconds and year.
func TestCronDialect(t *testing.T) {
	sunday, monday, saturday, friday := at(8, 10, 0), at(2, 10, 0), at(7, 10, 0), at(6, 10, 0)
	for _, tc := range []struct {
		expr    string
		in, out []time.Time
	}{
		{"* * * * 7", []time.Time{sunday}, []time.Time{monday, saturday}},
		{"* * * * 0", []time.Time{sunday}, []time.Time{monday}},
		{"* * * * MON-SUN", []time.Time{sunday, monday, saturday}, nil},
		{"* * * * mon-sun", []time.Time{sunday, monday}, nil},
		{"* * * * 1-7", []time.Time{sunday, monday, saturday}, nil},
		{"* * * * 5-7", []time.Time{friday, saturday, sunday}, []time.Time{monday}},
		{"* * * * 1-7/2", []time.Time{monday, sunday}, []time.Time{saturday}},    // 1,3,5,7
		{"* * * * 2-7/2", []time.Time{saturday}, []time.Time{sunday, friday}},    // 2,4,6
		{"* * * * sat-sun", []time.Time{saturday, sunday}, []time.Time{friday}},  // a range to SUN
		{"* * * * 0-7", []time.Time{sunday, monday, saturday}, nil},              // everything
		{"* * * * 7-7", []time.Time{sunday}, []time.Time{monday}},                // Sunday alone
		{"* 10 * * 1,7", []time.Time{sunday, monday}, []time.Time{at(2, 11, 0)}}, // a list with 7
		{"* * 9-17 * * mon-fri *", []time.Time{monday}, []time.Time{saturday}},   // docker-machine
		{"0-30 13,16 * * SUN", []time.Time{at(8, 13, 30)}, []time.Time{at(8, 13, 31), at(8, 14, 0)}},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s, err := parseCron(tc.expr)
			require.NoError(t, err)
			for _, in := range tc.in {
				assert.True(t, cronContains(s, in), "%s should contain %s", tc.expr, in.Format(time.RFC1123))
			}
			for _, out := range tc.out {
				assert.False(t, cronContains(s, out), "%s should not contain %s", tc.expr, out.Format(time.RFC1123))
			}
		})
	}
}

// FuzzParse: any text gives a Policy or a *FieldError, never a panic; a policy
// that parses gives decisions within its bounds at any time.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"- idle_count: 1", "[]", "", "-", "- periods: ['* 8-15 * * mon-fri']\n  timezone: Europe/Berlin\n  idle_count: 2\n  max: 4",
		`[{"periods":["*/5 * * * 1-7/2"],"idle_time":"1h","min":1,"max":3,"scale_factor":2,"max_growth_rate":1}]`,
		"- periods: ['TZ=', 'CRON_TZ=x', '@every 1s', '* * * * * * *']", "- timezone: ../../etc/passwd",
		"- &a {idle_count: 1}\n- *a", "- idle_time: 9999999999999h", "- periods: ['1-2-3 * * * 7-1']",
	} {
		f.Add(seed, int64(0), 3, 2)
	}
	f.Fuzz(func(t *testing.T, text string, unix int64, busy, claims int) {
		p, err := Parse(text)
		if err != nil {
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%T: %v", err, err)
			require.Nil(t, p)
			return
		}
		now := time.Unix(unix%(1<<40), 0)
		obs := Observation{Busy: busy % 1000, Idle: 1}
		for i := range claims % 50 {
			obs.Claims = append(obs.Claims, now.Add(-time.Duration(i)*time.Second))
		}
		d := Decide(p, obs, now)
		_, per := p.Active(now)
		require.GreaterOrEqual(t, d.Idle, 0)
		require.LessOrEqual(t, d.Idle, per.Max, d.Message)
		if per.MaxGrowthRate == 0 {
			require.GreaterOrEqual(t, d.Idle, per.Min, d.Message)
		}
	})
}

// Check returns every period's mistake, not only the first, each naming
// its period and key; none for a policy Parse accepts.
func TestCheckReturnsEveryMistake(t *testing.T) {
	errs := Check("- idle_count: 2\n- idle_time: 10x\n- periods: [\"* * * * monday\"]\n- max: 1\n  min: 2\n")
	require.Len(t, errs, 3)
	assert.Contains(t, errs[0].Error(), "period 1: idle_time:")
	assert.Contains(t, errs[1].Error(), `period 2: periods[0]: "* * * * monday": day of week "monday": want mon or 1`)
	assert.Contains(t, errs[2].Error(), "period 3: min: 2 is more than max (1)")
	assert.Empty(t, Check("- idle_count: 2\n  periods: [\"* 8-17 * * mon-fri\"]\n"))
	errs = Check("idle_count: 2")
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "want a list of periods")
}
