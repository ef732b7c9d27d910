package poolapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every key constant of the package is in Keys: the chart's tests check
// rendered keys against Keys, so a key left out would be refused there
// while the code writes it.
func TestKeysListsEveryKeyConstant(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "poolapi.go", nil, 0)
	require.NoError(t, err)
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for i, n := range s.(*ast.ValueSpec).Names {
				if !strings.HasPrefix(n.Name, "Label") && !strings.HasPrefix(n.Name, "Annotation") {
					continue
				}
				lit, ok := s.(*ast.ValueSpec).Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a string literal", n.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				declared = append(declared, v)
			}
		}
	}
	assert.Greater(t, len(declared), 10)
	assert.ElementsMatch(t, declared, Keys())
	seen := map[string]bool{}
	for _, k := range Keys() {
		assert.False(t, seen[k], "%s twice", k)
		seen[k] = true
		assert.LessOrEqual(t, len(k), 63+len(Prefix), "%s: a name part is at most 63 characters", k)
	}
}

func TestStateOf(t *testing.T) {
	idle := map[string]string{LabelState: StateIdle}
	claimed := map[string]string{LabelState: StateClaimed}
	retiring := map[string]string{AnnotationRetiring: "2026-12-05T10:00:00Z"}
	for _, tc := range []struct {
		name string
		f    PodFacts
		want PodState
	}{
		{"ready idle pod", PodFacts{Labels: idle, Scheduled: true, Ready: true}, PodIdle},
		{"idle pod on a node, not ready", PodFacts{Labels: idle, Scheduled: true}, PodStarting},
		{"idle pod on no node", PodFacts{Labels: idle}, PodPending},
		{"retiring, ready", PodFacts{Labels: idle, Annotations: retiring, Scheduled: true, Ready: true}, PodRetiring},
		{"retiring, pending", PodFacts{Labels: idle, Annotations: retiring}, PodRetiring},
		{"claimed", PodFacts{Labels: claimed, Scheduled: true, Ready: true}, PodBusy},
		{"claimed, and marked retiring after the claim won", PodFacts{Labels: claimed, Annotations: retiring, Ready: true}, PodBusy},
		{"cold pod still starting is busy", PodFacts{Labels: claimed}, PodBusy},
		{"terminating idle", PodFacts{Labels: idle, Ready: true, Terminating: true}, PodGone},
		{"finished claimed", PodFacts{Labels: claimed, Finished: true}, PodGone},
		{"no state label", PodFacts{Labels: map[string]string{LabelPool: "a"}, Ready: true}, PodGone},
		{"unknown state value", PodFacts{Labels: map[string]string{LabelState: "Idle"}, Ready: true}, PodGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, StateOf(tc.f))
		})
	}
}

func TestColdReasonDemand(t *testing.T) {
	for r, want := range map[ColdReason]bool{ColdNoIdle: true, ColdPending: true, ColdNoPool: false, ColdReleased: false, "": false} {
		assert.Equal(t, want, r.Demand(), r)
	}
}

// The drivers' --offers: a base URL of the controller, refused at once
// with what is wrong, never at the first claim.
func TestParseOfferURL(t *testing.T) {
	for raw, wantErr := range map[string]string{
		"http://warmpod-pools.ci:9090":      "",
		"https://warmpod-pools.ci:9090/":    "",
		"http://[fd00::1]:9090":             "",
		"http://ctl.example.com/prefix":     "",
		"warmpod-pools:9090":                "want http:// or https://",
		"ftp://x":                           "want http:// or https://",
		"http://":                           "no host",
		"http://:9090":                      "no host",
		"http://h:99999":                    "port 99999 is not 1–65535",
		"http://h:0":                        "port 0 is not 1–65535",
		"http://h:9090/v1/offer":            "without /v1/offer",
		"http://h:9090/v1/offer/":           "without /v1/offer",
		"http://h:9090/?pool=x":             "no query",
		"http://user:pw@h:9090":             "no query, fragment or user",
		"http://h:9090\n":                   "invalid control character",
		" http://h:9090":                    "first path segment in URL cannot contain colon",
		"http://warmpod-pools.ci:9090#frag": "no query, fragment or user",
	} {
		t.Run(raw, func(t *testing.T) {
			u, err := ParseOfferURL(raw)
			if wantErr == "" {
				require.NoError(t, err)
				assert.NotNil(t, u)
				return
			}
			require.ErrorContains(t, err, wantErr)
			assert.ErrorContains(t, err, "such as http://warmpod-pools.NAMESPACE:9090")
		})
	}
}
