// Package sizing is the deterministic sizing policy of warm pools: how many
// idle pods a pool should keep now, from its schedule and its measured demand,
// and how one namespace's idle budget is shared out among its pools.
//
// A pool is a Deployment whose replicas is its idle count: a claimed pod leaves
// the ReplicaSet, so the ReplicaSet keeps exactly replicas pods idle or
// starting (docs/design/pools.md). The policy therefore only ever says how many
// idle pods a pool should have; busy pods are outside every figure here, and
// a controller that applies a Decision by changing replicas can only remove
// pods that are idle or starting.
//
// Everything here is pure: no clock is read, no goroutine started, no timer
// armed. Decide and Share take the current time and the observations as
// arguments and return decisions, so the rules are tested with synthetic
// times. The controller (a later step of issue 28) feeds them what its
// informers saw and writes the result to the pool's Deployment.
//
// The policy's fields, their names and the "last matching period wins" rule
// are GitLab Runner's autoscaler policy, so that its users can carry their
// configuration over: the [[runners.autoscaler.policy]] sections of
// https://docs.gitlab.com/runner/configuration/advanced-configuration/
// (periods, timezone, idle_count, idle_time, scale_factor,
// scale_factor_limit) and, from its docker-machine predecessor
// ([[runners.machine.autoscaling]], same page), a growth limit in the spirit of
// MaxGrowthRate. min and max are warmpod's own.
package sizing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	// The controller runs FROM scratch, without /usr/share/zoneinfo: the
	// embedded database makes a timezone valid or not the same everywhere.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// Limits on what Parse accepts. Beyond them the text is a mistake, not a
// policy, and refusing it keeps every sum in Decide and Share far from
// overflowing an int.
const (
	// MaxCount bounds every count of a period (idle_count, min, max,
	// scale_factor_limit, max_growth_rate) and every figure Decide returns:
	// more idle pods than a Kubernetes cluster is tested to hold (150,000
	// pods) in one pool is a typo.
	MaxCount = 100_000
	// MaxScaleFactor bounds scale_factor (idle pods per busy pod).
	MaxScaleFactor = 1000
	// MaxPeriods bounds the number of periods of a policy, and MaxCrons the
	// cron expressions of one period.
	MaxPeriods = 64
	MaxCrons   = 64
	// MaxPolicyBytes bounds the policy text. Kubernetes allows 256 KiB for
	// all the annotations of an object together.
	MaxPolicyBytes = 64 << 10
	// NoMax is Period.Max when the period sets no max: the pool's size is then
	// bounded by the namespace's budget (Share) and MaxCount only.
	NoMax = MaxCount
)

// DefaultPeriod returns the period that applies when no period of a policy matches the time (and to
// the empty policy): idle_count 0 and idle_time 5 minutes, the values GitLab
// Runner uses when none of its policies is active (DefaultPolicy in
// executors/kubernetes/autoscaler/policy.go of gitlab-runner), no min, no
// max, no scale factor, no growth limit. Demand still counts outside every
// period: a job at 3 AM keeps a warm pod for the next 5 minutes and then the
// pool goes back to zero.
func DefaultPeriod() Period { return Period{IdleCount: 0, IdleTime: 5 * time.Minute, Max: NoMax} }

// Period is one entry of a policy: when it applies and how big the pool should
// be then. Build periods with Parse: it checks them and compiles the cron
// expressions (a Period built by hand has none and matches at every time).
type Period struct {
	// Periods are the cron expressions of the minutes in which this period
	// applies (GitLab's periods: 5 fields, see parseCron); empty = always,
	// GitLab's default "* * * * *".
	Periods []string
	// Timezone is the IANA zone (Europe/Berlin) the expressions are read in.
	// Empty = UTC, where GitLab takes the host's local zone: the controller's
	// pod has no local zone of its own, so warmpod says UTC outright.
	Timezone string
	// IdleCount is the idle pods to keep while this period applies and no
	// demand asks for more; the size the pool returns to after IdleTime
	// without a claim. 0 lets the pool scale to zero.
	IdleCount int
	// IdleTime is how long the pool keeps the capacity its recent demand
	// needed after that demand (GitLab: how long an instance may stay idle
	// before it is removed). 0 = only the current demand counts.
	IdleTime time.Duration
	// Min is a floor on the idle count whatever the demand, the schedule or
	// IdleTime say (docker-machine's IdleCountMin, which was that floor when
	// IdleScaleFactor was in use). Share gives every pool its Min first.
	Min int
	// Max is a ceiling on the idle count; NoMax when the period sets none.
	// An explicit 0 keeps the pool empty during the period.
	Max int
	// ScaleFactor asks for ScaleFactor idle pods per busy pod, rounded up
	// (GitLab: idle capacity as a factor of the capacity in use). 0 = off.
	ScaleFactor float64
	// ScaleFactorLimit caps what ScaleFactor can ask for; 0 = no cap but Max.
	ScaleFactorLimit int
	// MaxGrowthRate caps how many pods the pool's size may grow by in any
	// minute, in pods per minute; 0 = no limit. docker-machine's MaxGrowthRate
	// capped the machines being provisioned at once; per minute is what a
	// controller that only writes replicas can enforce.
	MaxGrowthRate int

	schedules []cron.Schedule
	loc       *time.Location
}

// Policy is a pool's list of periods, in the order written. The last period
// whose cron expressions match the time is the active one (GitLab: "The last
// matching policy is the one used"); when none matches, DefaultPeriod's is.
type Policy []Period

// Active returns the index and the period that apply at now: the last period
// one of whose expressions matches the minute of now in the period's zone, or
// -1 and DefaultPeriod() when none does.
func (p Policy) Active(now time.Time) (int, Period) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].matches(now) {
			return i, p[i]
		}
	}
	return -1, DefaultPeriod()
}

// matches tells whether one of the period's expressions holds for the minute
// of now, read in the period's zone. A period without expressions always
// matches.
func (p Period) matches(now time.Time) bool {
	if len(p.schedules) == 0 {
		return true
	}
	loc := p.loc
	if loc == nil {
		loc = time.UTC
	}
	for _, s := range p.schedules {
		if cronContains(s, now.In(loc)) {
			return true
		}
	}
	return false
}

// FieldError is a policy that Parse refused: which period (its index in the
// list, from 0; -1 for the text as a whole), which key, and why. The
// controller puts Error() in the pool's Event and log line as it is.
type FieldError struct {
	Period int
	Field  string
	Err    error
}

// Error says "policy: period 1: idle_count: ...", naming what is known.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("policy: ")
	if e.Period >= 0 {
		b.WriteString("period " + strconv.Itoa(e.Period) + ": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// rawPeriod is one period as written; Max is a pointer because an omitted max
// (NoMax) and max: 0 (no idle pod) differ.
type rawPeriod struct {
	Periods          []string `json:"periods"`
	Timezone         string   `json:"timezone"`
	IdleCount        int      `json:"idle_count"`
	IdleTime         string   `json:"idle_time"`
	Min              int      `json:"min"`
	Max              *int     `json:"max"`
	ScaleFactor      float64  `json:"scale_factor"`
	ScaleFactorLimit int      `json:"scale_factor_limit"`
	MaxGrowthRate    int      `json:"max_growth_rate"`
}

// exactKeys refuses a key of item (one period, JSON) that is a known key
// in other letter case ("MAX", "Idle_Count"): encoding/json matches keys
// without case, so "MAX: 0" and "Max: 1" would both be max, the last one
// winning, past the YAML's refusal of a key written twice. Other unknown
// keys are left to the decoder's error.
func exactKeys(item json.RawMessage) *FieldError {
	var keys map[string]json.RawMessage
	if json.Unmarshal(item, &keys) != nil {
		return nil // not a mapping: the decoder says so
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) { // the first in order: the same error each time
		for _, known := range strings.Split(knownKeys, ", ") {
			if k != known && strings.EqualFold(k, known) {
				return &FieldError{Field: k, Err: fmt.Errorf("keys are lower case: write %s", known)}
			}
		}
	}
	return nil
}

// knownKeys lists the keys of a period, for the unknown-key error.
const knownKeys = "periods, timezone, idle_count, idle_time, min, max, scale_factor, scale_factor_limit, max_growth_rate"

// Parse reads the policy text of a pool's warmpod.dev/policy annotation: a
// YAML list of periods, each a mapping of the keys of Period in GitLab's
// spelling (idle_count, idle_time: "30m", ...). YAML because the annotation
// sits in a YAML manifest, where a block scalar (`warmpod.dev/policy: |`)
// lets a GitLab user copy a [[runners.autoscaler.policy]] section key by key;
// JSON is YAML too, so a program may write JSON. Cron expressions must be
// quoted: an unquoted "*" starts a YAML alias.
//
// Any mistake is a *FieldError naming the period and the key: a cron field out
// of range, an unknown timezone, a negative or too large number, idle_count or
// min above max, an unknown or repeated key, a value of the wrong type. "[]"
// is the empty policy (DefaultPeriod at all times); empty text is an error.
func Parse(text string) (Policy, error) {
	items, fe := splitPeriods(text)
	if fe != nil {
		return nil, fe
	}
	pol := make(Policy, 0, len(items))
	for i, item := range items {
		per, err := parsePeriod(item)
		if err != nil {
			err.Period = i
			return nil, err
		}
		pol = append(pol, per)
	}
	return pol, nil
}

// Check reads text as Parse does and returns every mistake instead of the
// first: one *FieldError for the text as a whole, or the first of each
// period that has one, in order. None when Parse accepts the text
// (warmpod-pools check).
func Check(text string) []error {
	items, fe := splitPeriods(text)
	if fe != nil {
		return []error{fe}
	}
	var errs []error
	for i, item := range items {
		if _, err := parsePeriod(item); err != nil {
			err.Period = i
			errs = append(errs, err)
		}
	}
	return errs
}

// splitPeriods checks the text as a whole (size, YAML, a list, the number
// of periods) and returns its periods undecoded.
func splitPeriods(text string) ([]json.RawMessage, *FieldError) {
	if len(text) > MaxPolicyBytes {
		return nil, &FieldError{Period: -1, Err: fmt.Errorf("%d bytes, more than %d", len(text), MaxPolicyBytes)}
	}
	if strings.TrimSpace(text) == "" {
		return nil, &FieldError{Period: -1, Err: errors.New("empty; write a list of periods, or [] for the default")}
	}
	// Strict: a key written twice is refused instead of the last one winning.
	js, err := yaml.YAMLToJSONStrict([]byte(text))
	if err != nil {
		return nil, &FieldError{Period: -1, Err: fmt.Errorf("not YAML (quote cron expressions: \"* * * * *\"): %w", err)}
	}
	if n := yamlDocuments(text); n > 1 {
		// YAMLToJSONStrict reads the first document only: what follows a
		// "---" would be dropped without a word.
		return nil, &FieldError{Period: -1, Err: errors.New("more than one YAML document (a line ---): a policy is one list of periods")}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(js, &items); err != nil || items == nil {
		return nil, &FieldError{Period: -1, Err: errors.New("want a list of periods (- idle_count: 1 ...)")}
	}
	if len(items) > MaxPeriods {
		return nil, &FieldError{Period: -1, Err: fmt.Errorf("%d periods, more than %d", len(items), MaxPeriods)}
	}
	return items, nil
}

// yamlDocuments counts the documents of text that are not empty, up to 2.
// Text after the first document that does not parse counts as one: it is
// there, and the first document alone is not what was written.
func yamlDocuments(text string) int {
	dec := yamlv2.NewDecoder(strings.NewReader(text))
	n := 0
	for n < 2 {
		var v any
		err := dec.Decode(&v)
		switch {
		case errors.Is(err, io.EOF):
			return n
		case err != nil:
			return n + 1
		case v != nil:
			n++
		}
	}
	return n
}

// parsePeriod decodes and checks one period; the caller sets the index.
func parsePeriod(item json.RawMessage) (Period, *FieldError) {
	if string(bytes.TrimSpace(item)) == "null" {
		return Period{}, &FieldError{Err: errors.New("empty period (a list item without keys)")}
	}
	if fe := exactKeys(item); fe != nil {
		return Period{}, fe
	}
	var raw rawPeriod
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return Period{}, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Period{}, &FieldError{Err: errors.New("want one mapping")}
	}
	per := Period{
		Periods: raw.Periods, Timezone: raw.Timezone, IdleCount: raw.IdleCount, Min: raw.Min, Max: NoMax,
		ScaleFactor: raw.ScaleFactor, ScaleFactorLimit: raw.ScaleFactorLimit, MaxGrowthRate: raw.MaxGrowthRate,
	}
	if raw.Max != nil {
		per.Max = *raw.Max
	}
	if fe := checkCounts(per, raw.Max != nil); fe != nil {
		return Period{}, fe
	}
	if raw.IdleTime != "" {
		d, err := time.ParseDuration(raw.IdleTime)
		if err != nil || d < 0 {
			return Period{}, &FieldError{Field: "idle_time", Err: fmt.Errorf("%q is not a duration >= 0 like \"30m\" or \"1800s\"", raw.IdleTime)}
		}
		per.IdleTime = d
	}
	loc, fe := loadZone(raw.Timezone)
	if fe != nil {
		return Period{}, fe
	}
	per.loc = loc
	if len(raw.Periods) > MaxCrons {
		return Period{}, &FieldError{Field: "periods", Err: fmt.Errorf("%d expressions, more than %d", len(raw.Periods), MaxCrons)}
	}
	for j, expr := range raw.Periods {
		s, err := parseCron(expr)
		if err != nil {
			return Period{}, &FieldError{Field: "periods[" + strconv.Itoa(j) + "]", Err: err}
		}
		per.schedules = append(per.schedules, s)
	}
	return per, nil
}

// checkCounts refuses negative and oversized numbers, and idle_count or min
// above an explicit max (the pool could never reach them).
func checkCounts(per Period, hasMax bool) *FieldError {
	counts := []struct {
		name string
		v    int
	}{
		{"idle_count", per.IdleCount}, {"min", per.Min}, {"max", per.Max},
		{"scale_factor_limit", per.ScaleFactorLimit}, {"max_growth_rate", per.MaxGrowthRate},
	}
	for _, c := range counts {
		if c.v < 0 || c.v > MaxCount {
			return &FieldError{Field: c.name, Err: fmt.Errorf("%d is outside 0..%d", c.v, MaxCount)}
		}
	}
	if per.ScaleFactor < 0 || per.ScaleFactor > MaxScaleFactor || math.IsNaN(per.ScaleFactor) {
		return &FieldError{Field: "scale_factor", Err: fmt.Errorf("%v is outside 0..%d", per.ScaleFactor, MaxScaleFactor)}
	}
	if hasMax && per.IdleCount > per.Max {
		return &FieldError{Field: "idle_count", Err: fmt.Errorf("%d is more than max (%d)", per.IdleCount, per.Max)}
	}
	if hasMax && per.Min > per.Max {
		return &FieldError{Field: "min", Err: fmt.Errorf("%d is more than max (%d)", per.Min, per.Max)}
	}
	return nil
}

// loadZone resolves a period's timezone; empty is UTC. "Local" is refused: it
// would make the policy mean something else on every host.
func loadZone(name string) (*time.Location, *FieldError) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, &FieldError{Field: "timezone", Err: errors.New(`"Local" depends on the host; name a zone like "Europe/Berlin" or "UTC"`)}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &FieldError{Field: "timezone", Err: fmt.Errorf("unknown time zone %q (want an IANA name like \"Europe/Berlin\")", name)}
	}
	return loc, nil
}

// decodeError turns encoding/json's errors into a FieldError that names the
// key in the policy's spelling rather than a Go type.
func decodeError(err error) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &FieldError{Field: te.Field, Err: fmt.Errorf("want %s, got %s", kindName(te.Type.String()), te.Value)}
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &FieldError{Err: fmt.Errorf("unknown key %s (known: %s)", rest, knownKeys)}
	}
	if te != nil || strings.Contains(msg, "cannot unmarshal") {
		return &FieldError{Err: errors.New("want a mapping of keys to values")}
	}
	return &FieldError{Err: errors.New(strings.TrimPrefix(msg, "json: "))}
}

// kindName says a Go type as the policy's author knows it.
func kindName(goType string) string {
	switch goType {
	case "int":
		return "a whole number"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	}
	return goType
}
