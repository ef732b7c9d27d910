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
