package sizing

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronField names field i (0-4) of a GitLab period.
func cronField(i int) string {
	return [...]string{"minute", "hour", "day of month", "month", "day of week"}[i]
}

// cronWant says what field i (0-4) of a period takes.
func cronWant(i int) string {
	return [...]string{"0..59", "0..23", "1..31", "jan or 1 (jan..dec, or 1..12)",
		"mon or 1 (mon..sun, or 0..7 where 0 and 7 are Sunday)"}[i]
}

// parseCron compiles one expression of a period's periods. The syntax is the
// one GitLab documents for [[runners.autoscaler.policy]] periods ("Periods
// syntax" of https://docs.gitlab.com/runner/configuration/advanced-configuration/):
// five fields, minute hour day-of-month month day-of-week, each a value, a
// range a-b, a list a,b, "*", a step /n; months also JAN-DEC; days of the week
// 1-7 or MON-SUN, with 0 an alias of Sunday. robfig/cron parses the fields
// (its day of the week is 0-6), so a 7 or a SUN that ends a range is rewritten
// first (normalizeDow).
//
// docker-machine's [[runners.machine.autoscaling]] Periods had seven fields,
// second minute hour day-of-month month day-of-week year (gorhill/cronexpr).
// A user carrying one over may keep it when the second and the year are "*":
// the other five are the same fields. Six fields are refused: neither syntax.
// Errors name the field.
func parseCron(expr string) (cron.Schedule, error) {
	fields := strings.Fields(expr)
	switch len(fields) {
	case 5:
	case 7:
		if fields[0] != "*" || fields[6] != "*" {
			return nil, fmt.Errorf("%q: a 7-field docker-machine period is accepted only with * as its second and year; write GitLab's 5 fields (minute hour day-of-month month day-of-week)", expr)
		}
		fields = fields[1:6]
	default:
		return nil, fmt.Errorf("%q: %d fields; a period has 5: minute hour day-of-month month day-of-week", expr, len(fields))
	}
	for i, f := range fields {
		// robfig/cron reads TZ= and @descriptors too; a period has neither
		// (the zone is the period's timezone).
		if strings.ContainsFunc(f, func(r rune) bool { return !strings.ContainsRune("0123456789*,-/?", r) && !isASCIILetter(r) }) {
			return nil, fmt.Errorf("%q: %s: %q has a character a cron field cannot have", expr, cronField(i), f)
		}
	}
	written := slices.Clone(fields)
	dow, err := normalizeDow(fields[4])
	if err != nil {
		return nil, fmt.Errorf("%q: day of week: %w", expr, err)
	}
	fields[4] = dow
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	s, err := parser.Parse(strings.Join(fields, " "))
	if err == nil {
		// robfig/cron looks 5 years ahead; an expression that matches no
		// minute in them (February 30) is a mistake, and would cost Decide
		// that whole search at every call.
		if s.Next(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			return nil, fmt.Errorf("%q matches no minute at all", expr)
		}
		return s, nil
	}
	// Say which field is wrong: parse each alone, the others "*", and what
	// the field takes; robfig/cron's own reason only when it is not a bare
	// strconv one ("monday" wants "mon or 1", not strconv.Atoi's words).
	for i := range fields {
		one := []string{"*", "*", "*", "*", "*"}
		one[i] = fields[i]
		if _, ferr := parser.Parse(strings.Join(one, " ")); ferr != nil {
			why := ""
			if !strings.Contains(ferr.Error(), "strconv") {
				why = " (" + ferr.Error() + ")"
			}
			return nil, fmt.Errorf("%q: %s %q: want %s%s", expr, cronField(i), written[i], cronWant(i), why)
		}
	}
	return nil, fmt.Errorf("%q: %w", expr, err)
}

func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// normalizeDow rewrites GitLab's Sunday-as-7 into robfig/cron's 0-6: "7" is
// "0", and a range that ends on 7 or SUN (MON-SUN, 5-7, 1-7/2) ends on 6 and
// gains ",0" when its step lands on Sunday. Everything else passes through
// for robfig/cron to check.
func normalizeDow(field string) (string, error) {
	parts := strings.Split(field, ",")
	var out []string
	for _, part := range parts {
		rng, stepText, hasStep := strings.Cut(part, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			if rng == "7" && !hasStep {
				part = "0"
			}
			out = append(out, part)
			continue
		}
		if hi != "7" && !strings.EqualFold(hi, "sun") {
			out = append(out, part)
			continue
		}
		start, ok := dowValue(lo)
		if !ok {
			out = append(out, part) // robfig/cron names the mistake
			continue
		}
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return "", fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		suffix := ""
		if hasStep {
			suffix = "/" + stepText
		}
		switch {
		case start == 7:
			out = append(out, "0")
		case start == 0:
			out = append(out, "0-6"+suffix)
		default:
			out = append(out, strconv.Itoa(start)+"-6"+suffix)
			if (7-start)%step == 0 {
				out = append(out, "0")
			}
		}
	}
	if len(out) == 0 {
		return "", errors.New("empty")
	}
	return strings.Join(out, ","), nil
}

// dowValue reads the start of a day-of-week range: 0-7 or a name, as
// robfig/cron numbers days (SUN = 0).
func dowValue(s string) (int, bool) {
	days := [...]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	for n, d := range days {
		if strings.EqualFold(s, d) {
			return n, true
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 7 {
		return 0, false
	}
	return n, true
}

// cronContains tells whether the minute of t (read in t's location) is one
// of the schedule's. A period is a set of minutes (GitLab: "this cron job
// represents a range in time"), while robfig/cron only answers "the next
// matching time after": the minute matches when the next match after the
// second before it is the minute itself.
func cronContains(s cron.Schedule, t time.Time) bool {
	floor := t.Add(-(time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())))
	return s.Next(floor.Add(-time.Second)).Equal(floor)
}
