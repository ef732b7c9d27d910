package pools

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// View is one pool as `warmpod-pools status` shows it: what its
// Deployment, its pods and the controller's annotations on it say now.
type View struct {
	Name, Image string
	// FoundFrom is the image the controller made the pool for (""
	// for a pool a person wrote).
	FoundFrom string
	// Replicas is the pool's size (its idle target): the size the
	// controller last decided (its status), else its Deployment's replicas
	// (a pool it does not size, or has not yet); Idle, Starting, Pending,
	// Retiring and Busy its pods by state, the controller's own above the
	// floor among them (decision 0010).
	Replicas                                int
	Idle, Starting, Pending, Retiring, Busy int
	// Floor and Max are the active period's min and max (Max NoMax: none);
	// IdleCount its idle_count; Period its index (-1: the default).
	Floor, Max, IdleCount, Period int
	// Policy is "" when the pool has none (the controller leaves it alone),
	// PolicyErr what is wrong with it.
	Policy, PolicyErr string
	// Status is the controller's last word on the pool's size
	// (poolapi.AnnotationSizing); zero when it has written none.
	Status Status
	// Coming are the bursts the learned profile expects in the next day,
	// one per slot that expects any, soonest first, at most five.
	Coming []sizing.Forecast
	// ProfileErr says why the saved profile does not read.
	ProfileErr string
	// Claims are its claims of the last hour and day as the leading
	// controller counted them (FetchRecent); nil when not known.
	Claims *RecentClaims
}

// WithClaims sets each view's Claims from recent (by pool name).
func WithClaims(views []View, recent []RecentClaims) {
	by := map[string]*RecentClaims{}
	for i := range recent {
		by[recent[i].Pool] = &recent[i]
	}
	for i := range views {
		views[i].Claims = by[views[i].Name]
	}
}

// claimsLine is a pool's claims of the last hour and day, for a person:
// "claims, last hour: 18 of 19 warm (95 %), wait p50 0.10 s, p95 8.50 s;
// last day: …", and since when the controller counted when that is less
// than a day.
func claimsLine(r RecentClaims, now time.Time) string {
	win := func(name string, c ClaimWindow) string {
		n := c.Warm + c.Cold
		if n == 0 {
			return name + ": no claim"
		}
		return fmt.Sprintf("%s: %d of %d warm (%.0f %%), wait p50 %.2f s, p95 %.2f s", name, c.Warm, n,
			100*float64(c.Warm)/float64(n), c.WaitP50Secs, c.WaitP95Secs)
	}
	line := "claims, " + win("last hour", r.Hour) + "; " + win("last day", r.Day)
	if !r.Since.IsZero() && now.Sub(r.Since) < history {
		line += fmt.Sprintf(" (counted since the controller took the lead, %s ago)", now.Sub(r.Since).Round(time.Second))
	}
	return line
}

// Views reads the pools of deps (pool Deployments) and pods (the
// namespace's pool pods) at now. Pools are in the order of their names.
func Views(deps []appsv1.Deployment, pods []corev1.Pod, now time.Time) []View {
	byPool := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		byPool[p.Labels[poolapi.LabelPool]] = append(byPool[p.Labels[poolapi.LabelPool]], p)
	}
	var out []View
	for i := range deps {
		d := &deps[i]
		v := View{Name: d.Name, Image: pool.JobImage(&d.Spec.Template.Spec), FoundFrom: d.Annotations[poolapi.AnnotationFoundFrom],
			Replicas: replicasOf(d), Status: readStatus(d), Period: -1, Max: sizing.NoMax}
		if _, sized := d.Annotations[poolapi.AnnotationPolicy]; sized && !v.Status.DecidedAt.IsZero() && v.Status.Reason != "invalid" {
			v.Replicas = v.Status.Replicas
		}
		for _, p := range byPool[d.Spec.Template.Labels[poolapi.LabelPool]] {
			switch pool.StateOf(p) {
			case poolapi.PodIdle:
				v.Idle++
			case poolapi.PodStarting:
				v.Starting++
			case poolapi.PodPending:
				v.Pending++
			case poolapi.PodRetiring:
				v.Retiring++
			case poolapi.PodBusy:
				v.Busy++
			}
		}
		if text, ok := d.Annotations[poolapi.AnnotationPolicy]; ok {
			v.Policy = text
			pol, err := sizing.Parse(text)
			if err != nil {
				v.PolicyErr = err.Error()
			} else {
				idx, per := pol.Active(now)
				v.Period, v.Floor, v.Max, v.IdleCount = idx, per.Min, per.Max, per.IdleCount
			}
		}
		if text, ok := d.Annotations[poolapi.AnnotationProfile]; ok {
			prof, err := sizing.UnmarshalProfile(text)
			if err != nil {
				v.ProfileErr = err.Error()
			} else {
				v.Coming = coming(&prof, now)
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b View) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// coming is what prof expects over the day from now: the first forecast
// of each slot that expects pods, and the first of each stretch of time a
// trickle keeps its pod (its At moves on with every slot), at most five.
func coming(prof *sizing.Profile, now time.Time) []sizing.Forecast {
	var out []sizing.Forecast
	trickling := false // the last slot's forecast was a trickle's
	for t := now; t.Before(now.Add(24*time.Hour)) && len(out) < 5; t = t.Add(sizing.ProfileSlot) {
		f := prof.Forecast(t, 0)
		same := len(out) > 0 && out[len(out)-1].At.Equal(f.At) || trickling && f.Trickle
		trickling = f.Trickle
		if f.Pods > 0 && !same {
			out = append(out, f)
		}
	}
	return out
}

// RenderViews writes views for a person: a table of the pools, then per
// pool why it has its size and what it expects.
func RenderViews(w io.Writer, views []View, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tIMAGE\tTARGET\tIDLE\tSTARTING\tPENDING\tBUSY\tFLOOR\tMAX\tREASON\tDECIDED")
	for _, v := range views {
		maxS := "-"
		if v.Max != sizing.NoMax {
			maxS = fmt.Sprint(v.Max)
		}
		reason, decided := "-", "-"
		switch {
		case v.Policy == "":
			reason = "no policy (not sized)"
		case v.PolicyErr != "":
			reason = "invalid policy"
		case v.Status.Reason != "":
			reason = v.Status.Reason
		}
		if !v.Status.DecidedAt.IsZero() {
			decided = ago(v.Status.DecidedAt, now)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", v.Name, printable(v.Image), v.Replicas, v.Idle, v.Starting+v.Retiring, v.Pending,
			v.Busy, max(v.Floor, v.IdleCount), maxS, printable(reason), decided)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range views {
		fmt.Fprintf(w, "\n%s:\n", v.Name)
		if v.FoundFrom != "" {
			fmt.Fprintf(w, "  made by the controller for %s (jobs went cold without a pool); removed after a week without a claim\n", printable(v.FoundFrom))
		}
		switch {
		case v.Policy == "":
			fmt.Fprintf(w, "  no %s: the controller leaves its size alone\n", poolapi.AnnotationPolicy)
		case v.PolicyErr != "":
			fmt.Fprintf(w, "  %s does not read, the pool keeps its size: %s\n", poolapi.AnnotationPolicy, printable(v.PolicyErr))
		default:
			period := "no period matches: the default"
			if v.Period >= 0 {
				period = fmt.Sprintf("period %d", v.Period)
			}
			fmt.Fprintf(w, "  %s: idle_count %d, min %d\n", period, v.IdleCount, v.Floor)
		}
		if v.Status.Message != "" {
			fmt.Fprintf(w, "  last change: %s\n", printable(v.Status.Message))
		}
		if v.Status.PodStart > 0 {
			fmt.Fprintf(w, "  pod start (measured): %.1f s\n", v.Status.PodStart)
		}
		if v.Claims != nil {
			fmt.Fprintf(w, "  %s\n", claimsLine(*v.Claims, now))
		}
		switch {
		case v.ProfileErr != "":
			fmt.Fprintf(w, "  the saved profile does not read (the controller learns anew): %s\n", printable(v.ProfileErr))
		case len(v.Coming) == 0 && v.Policy != "" && v.PolicyErr == "":
			fmt.Fprintln(w, "  learned: nothing expected in the next 24 h")
		default:
			for _, f := range v.Coming {
				fmt.Fprintf(w, "  learned: %s\n", f.Why)
			}
		}
	}
	return nil
}

// printable is s as one line of a terminal: a control character (an
// escape sequence, a tab or newline that would add a row to the table) in
// text from an annotation anyone with patch on the Deployment wrote is
// shown escaped (\x1b, \n), not sent to the terminal.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			b.WriteRune('\uFFFD')
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ago is how long before now at was, for a person: "1m30s ago"; a time
// after now (a clock ahead, or an annotation written by hand) or more than
// a month back is shown as its date instead of a negative or huge span.
func ago(at, now time.Time) string {
	d := now.Sub(at)
	switch {
	case d < -maxSkew:
		return "in the future: " + at.UTC().Format(time.RFC3339)
	case d > 30*24*time.Hour:
		return at.UTC().Format(time.DateOnly)
	}
	return max(d, 0).Round(time.Second).String() + " ago"
}
