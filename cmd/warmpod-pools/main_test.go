package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
	for _, args := range [][]string{{"--no-such-flag"}, {"--budget-pods=-3"}, {"extra"}, {"--resync=soon"},
		// client-go's leader election panicked on these (issue 39).
		{"--lease-duration=1s"}, {"--renew-deadline=2s"}, {"--retry-period=0s"},
		{"--kube-api-qps=0"}, {"--kube-api-burst=0"}, {"--resync=0s"}, {"status", "extra"},
		// Refused before anything connects (the hostile trial's).
		{"--metrics-addr=bogus"}, {"--namespace", "status"}, {"version", "extra"}, {"check", "--namespace", "x"}} {
		assert.Equal(t, 2, run(args), "%v", args)
	}
	assert.Equal(t, 0, run([]string{"version"}))
}

// warmpod-pools check reads a policy from a file or standard input and
// prints every mistake with its period and key and what the key takes:
// exit 65 when there is one, 0 when the policy is valid, 2 on usage, 1
// when the cluster cannot be read.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("- idle_count: 2\n- idle_time: 10x\n- periods: [\"* 8-17 * * monday\"]\n"), 0o644))
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("- idle_count: 2\n  periods: [\"* 8-17 * * mon-fri\"]\n"), 0o644))
	unreachable := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: ci}}]
current-context: c
`), 0o600))
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		out   []string
	}{
		{"a file with two mistakes", []string{bad}, "", 65, []string{
			bad + `: policy: period 1: idle_time: "10x" is not a duration`,
			bad + `: policy: period 2: periods[0]: "* 8-17 * * monday": day of week "monday": want mon or 1`}},
		{"a valid file", []string{good}, "", 0, []string{good + ": ok"}},
		{"standard input", []string{"-"}, "- min: 3\n  max: 2\n", 65, []string{"standard input: policy: period 0: min: 3 is more than max (2)"}},
		{"not a list", []string{"-"}, "idle_count: 1\n", 65, []string{"want a list of periods"}},
		{"too large", []string{"-"}, strings.Repeat("#", 200_000), 65, []string{"standard input: more than 65536 bytes"}},
		{"no such file", []string{filepath.Join(dir, "none")}, "", 2, []string{"no such file"}},
		{"a directory", []string{dir}, "", 2, []string{dir + " is a directory"}},
		{"two files", []string{good, good}, "", 2, []string{"check takes one FILE"}},
		{"the cluster, unreachable", nil, "", 1, []string{"list the pools of namespace ci"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := check(context.Background(), options{kubeconfig: unreachable}, tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			assert.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
			for _, w := range tc.out {
				assert.Contains(t, out.String()+errOut.String(), w)
			}
		})
	}
}

// Without an API server the controller exits 1 naming where it looked,
// instead of retrying forever while /healthz answers ok (issue 39).
func TestUnreachableAPIServerEndsTheRun(t *testing.T) {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	err = reachable(context.Background(), cs, "https://127.0.0.1:1", 1500*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot reach the API server at https://127.0.0.1:1")
}

// A mistyped command line is refused with the word and the fix; a flag's
// value that names a command, given without one, never starts the
// controller.
func TestCommandNamesTheWordAndTheFix(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" = accepted
		cmd  string
	}{
		{nil, "", ""},
		{[]string{"status"}, "", "status"},
		{[]string{"check", "-"}, "", "check"},
		{[]string{"check", "policy.yaml"}, "", "check"},
		{[]string{"statsu"}, `unknown command "statsu": did you mean status?`, ""},
		{[]string{"chek"}, "did you mean check?", ""},
		{[]string{"help"}, `unknown command "help": the commands are check, status, version, after the flags (-h lists them)`, ""},
		{[]string{"version", "extra"}, `version takes no argument; got "extra"`, ""},
		{[]string{"status", "--namespace", "x"}, "status: flag --namespace after the command; flags come before it: warmpod-pools --namespace … status", ""},
		{[]string{"false", "status"}, "a bool flag takes its value after = (--leader-elect=false)", ""},
	} {
		cmd, err := command(c.args)
		if c.want == "" {
			require.NoError(t, err, "%v", c.args)
			assert.Equal(t, c.cmd, cmd)
			continue
		}
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.want)
	}
	_, _, err := parseFlags([]string{"--namespace", "status"})
	require.ErrorContains(t, err, "--namespace status: a value that names a command")
	_, _, err = parseFlags([]string{"--namespace", "status", "status"})
	require.NoError(t, err, "a namespace called status, with the command")
	_, _, err = parseFlags([]string{"--resync=5x"})
	require.ErrorContains(t, err, `--resync: "5x" is not a Go duration`)
}
