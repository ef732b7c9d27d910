package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/sizing"
)

// The budget flags become a sizing.Budget; a bad one is refused with the
// flag named, before anything connects.
func TestBudgetFlags(t *testing.T) {
	cases := []struct {
		args []string
		want sizing.Budget
		err  string
	}{
		{args: nil, want: sizing.Budget{}},
		{args: []string{"--budget-pods=20", "--budget-cpu=2500m", "--budget-memory=8Gi"},
			want: sizing.Budget{Pods: 20, MilliCPU: 2500, MemoryBytes: 8 << 30}},
		{args: []string{"--budget-cpu=4"}, want: sizing.Budget{MilliCPU: 4000}},
		{args: []string{"--budget-pods=-1"}, err: "--budget-pods -1"},
		{args: []string{"--budget-cpu=lots"}, err: `--budget-cpu "lots"`},
		{args: []string{"--budget-memory=0"}, err: `--budget-memory "0"`},
	}
	for _, tc := range cases {
		o, _, err := parseFlags(tc.args)
		require.NoError(t, err, "%v", tc.args)
		b, err := o.budget()
		if tc.err != "" {
			require.Error(t, err, "%v", tc.args)
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, b, "%v", tc.args)
	}
}

// Each flag has its WARMPOD_POOLS_ twin; the command line wins.
func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("WARMPOD_POOLS_BUDGET_PODS", "7")
	t.Setenv("WARMPOD_POOLS_NAMESPACE", "ci")
	o, _, err := parseFlags([]string{"--namespace=other"})
	require.NoError(t, err)
	assert.Equal(t, 7, o.budgetPods)
	assert.Equal(t, "other", o.namespace)
}

// Bad command lines exit 2 without connecting anywhere.
func TestRunRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{{"--no-such-flag"}, {"--budget-pods=-3"}, {"extra"}, {"--resync=soon"}} {
		assert.Equal(t, 2, run(args), "%v", args)
	}
	assert.Equal(t, 0, run([]string{"version"}))
}
