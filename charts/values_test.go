package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// template renders warmpod's chart with values (YAML text) and any extra
// helm flags.
func template(t *testing.T, values string, flags ...string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(f, []byte(values), 0o644))
	return run(t, append([]string{"template", "ci", "warmpod", "-n", "ci", "-f", f}, flags...)...)
}

// Values that the schema cannot refuse (relations between keys, the
// policy's text) fail `helm template` and `helm install` with the key
// named and the fix, instead of an object the API server refuses or a
// chart that silently does something else.
func TestChartRefusesValues(t *testing.T) {
	const pool = "pools:\n- name: alpine\n  image: alpine:3.20\n"
	policy := func(text string) string {
		return pool + "  policy: |\n" + indent(text, "    ")
	}
	for _, tc := range []struct {
		name, values string
		want         []string
	}{
		{"two pools of one name", pool + "- name: alpine\n  image: alpine:3.21\n",
			[]string{`pools[1] (alpine): name "alpine" is also pools[0]'s`, "rename one"}},
		{"a GitLab service named build", pool + "  services: [{name: build, image: postgres:16}]\n",
			[]string{`pools[0] (alpine): services[0].name "build" is the name of the pool's job container ("build" for gitlab pools)`}},
		{"a GitHub service named job", "pools:\n- {name: u, for: github, image: ubuntu:24.04, services: [{name: job, image: postgres:16}]}\n",
			[]string{`services[0].name "job" is the name of the pool's job container ("job" for github pools)`}},
		{"two services of one name", pool + "  services: [{name: db, image: postgres:16}, {name: db, image: redis:7}]\n",
			[]string{`services[1].name "db" is also services[0]'s`}},
		{"two default pools", "pools:\n- {name: a, image: a:1, default: true}\n- {name: b, image: b:1, default: true}\n",
			[]string{"pools[0] (a), pools[1] (b) are each default: true"}},
		{"pod account not created nor named", "serviceAccount: {create: false}\n",
			[]string{"serviceAccount.name: set it when serviceAccount.create is false"}},
		{"driver account not created nor named", "gitlab: {serviceAccount: {create: false}}\n",
			[]string{"gitlab.serviceAccount.name: set it when gitlab.serviceAccount.create is false"}},
		{"hook account not created nor named", "github: {serviceAccount: {create: false}}\n",
			[]string{"github.serviceAccount.name: set it"}},
		{"controller account not created nor named", "controller: {serviceAccount: {create: false}}\n",
			[]string{"controller.serviceAccount.name: set it"}},
		{"policy: not a list", policy("idle_count: 2\n"),
			[]string{"pools[0] (alpine): policy: not a YAML list of periods", "warmpod-pools check"}},
		{"policy: unknown key", policy("- idle_count: 2\n  idle_tme: 10m\n"),
			[]string{`pools[0] (alpine): policy period 0: unknown key "idle_tme"`, "idle_time", "warmpod-pools check"}},
		{"policy: a duration that is not Go's", policy("- idle_count: 2\n- idle_time: 10 minutes\n"),
			[]string{"policy period 1: idle_time: 10 minutes is not a Go duration, e.g. 30m"}},
		{"policy: a count that is not one", policy("- idle_count: two\n"),
			[]string{`policy period 0: idle_count: "two" is not a count`}},
		{"policy: a count in quotes", policy("- idle_count: \"2\"\n"),
			[]string{`policy period 0: idle_count: "2" is not a count (a whole number, 0..100000, unquoted)`}},
		{"policy: a count too large is said as written", policy("- idle_count: 10000000\n"),
			[]string{`idle_count: 10000000 is not a count (a whole number, 0..100000`}},
		{"policy: null", policy("null\n"),
			[]string{"pools[0] (alpine): policy: want a list of periods"}},
		{"policy: a step of 0", policy(`- periods: ["*/0 * * * *"]` + "\n"),
			[]string{`minute "*/0": want 0..59`}},
		{"a service named as an init container", pool + "  services: [{name: install-warmpod, image: postgres:16}]\n",
			[]string{`services[0].name "install-warmpod" is the name of one of the pool pod's init containers`}},
		{"a GitHub service named externals", "pools:\n- {name: u, for: github, image: ubuntu:24.04, services: [{name: externals, image: postgres:16}]}\n",
			[]string{`services[0].name "externals" is the name of one of the pool pod's init containers`}},
		{"a service name that is not a container name", pool + "  services: [{name: My_PG, image: postgres:16}]\n",
			[]string{`services[0].name "My_PG" is not a container name`}},
		{"a pool named as the controller", "pools:\n- {name: ci-warmpod-pools, image: a:1}\n",
			[]string{`name "ci-warmpod-pools" is the pool controller's Deployment`}},
		{"a runner image without a tag", "gitlab: {runnerImage: {repository: registry.example.com/ci/runner}}\n",
			[]string{"gitlab.runnerImage.tag: set it with gitlab.runnerImage.repository"}},
		{"policy: a negative count", policy("- min: -1\n"),
			[]string{"policy period 0: min: -1 is not a count"}},
		{"policy: a day of the week spelt out", policy(`- periods: ["* 8-17 * * monday"]` + "\n"),
			[]string{`policy period 0: periods[0]: "* 8-17 * * monday": day of week "monday": want mon or 1`}},
		{"policy: a month spelt out", policy(`- periods: ["* * * january *"]` + "\n"),
			[]string{`month "january": want jan or 1`}},
		{"policy: an hour out of range", policy(`- periods: ["* 8-24 * * *"]` + "\n"),
			[]string{`hour "8-24": want 0..23`}},
		{"policy: six fields", policy(`- periods: ["0 * 8-17 * * mon-fri"]` + "\n"),
			[]string{`has 6 fields; a period has 5`}},
		{"policy: periods not a list", policy(`- periods: "* * * * *"` + "\n"),
			[]string{`periods: * * * * * is not a list of cron expressions`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := template(t, tc.values)
			require.Error(t, err, "%s", out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
		})
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

// Values that are valid render as values.yaml documents them.
func TestChartRendersValuesAsDocumented(t *testing.T) {
	t.Run("a valid policy passes the render-time check", func(t *testing.T) {
		out, err := template(t, "pools:\n- name: alpine\n  image: alpine:3.20\n  policy: |\n"+indent(`- idle_count: 0
  idle_time: 10m
- periods: ["* 8-17 * * mon-fri", "*/15 0-7,18-23 1-31 JAN-dec 0,7", "* * * * * * *", "0 11 ? * MON"]
  timezone: Europe/Berlin
  idle_count: 2
  idle_time: .5h
  min: 1
  max: 20
  scale_factor: 0.5
  scale_factor_limit: 4
  max_growth_rate: 10
`, "    "))
		require.NoError(t, err, "%s", out)
	})
	t.Run("discoverPools turns the controller's flag on and gives it create and delete on Deployments only then", func(t *testing.T) {
		for _, on := range []bool{false, true} {
			out, err := template(t, fmt.Sprintf("controller: {discoverPools: %t}\n", on))
			require.NoError(t, err, "%s", out)
			objs := objects(t, out)
			var args []any
			for _, d := range objs["Deployment"] {
				if strings.HasSuffix(fmt.Sprint(dig(t, d, "metadata", "name")), "-pools") {
					args = dig(t, d, "spec", "template", "spec", "containers", 0, "args").([]any)
				}
			}
			require.NotEmpty(t, args)
			var verbs []any
			for _, r := range objs["Role"] {
				if strings.HasSuffix(fmt.Sprint(dig(t, r, "metadata", "name")), "-pools") {
					verbs = dig(t, r, "rules", 0, "verbs").([]any)
				}
			}
			if on {
				assert.Contains(t, args, "--discover-pools")
				assert.Equal(t, []any{"get", "list", "watch", "patch", "create", "delete"}, verbs)
			} else {
				assert.NotContains(t, args, "--discover-pools")
				assert.Equal(t, []any{"get", "list", "watch", "patch"}, verbs)
			}
		}
	})
	t.Run("networkPolicy with no pools selects the release's pool pods by label", func(t *testing.T) {
		out, err := template(t, "networkPolicy: {enabled: true}\n")
		require.NoError(t, err, "%s", out)
		objs := objects(t, out)
		require.Len(t, objs["NetworkPolicy"], 1)
		sel := dig(t, objs["NetworkPolicy"][0], "spec", "podSelector")
		assert.Equal(t, "ci", dig(t, sel, "matchLabels", "app.kubernetes.io/instance"))
		assert.Equal(t, map[string]any{"key": "warmpod.dev/pool", "operator": "Exists"}, dig(t, sel, "matchExpressions", 0))
	})
	t.Run("a pool's key replaces poolDefaults' whole", func(t *testing.T) {
		out, err := template(t, "pools:\n- {name: a, image: a:1, replicas: 0, resources: {limits: {memory: 1Gi}}, nodeSelector: {}}\n"+
			"poolDefaults: {nodeSelector: {pool: warm}}\n")
		require.NoError(t, err, "%s", out)
		d := objects(t, out)["Deployment"]
		var pool map[string]any
		for _, o := range d {
			if dig(t, o, "metadata", "name") == "a" {
				pool = o
			}
		}
		require.NotNil(t, pool)
		assert.EqualValues(t, 0, dig(t, pool, "spec", "replicas"), "replicas: 0 is a pool of 0, not poolDefaults' 1")
		spec := dig(t, pool, "spec", "template", "spec")
		assert.Equal(t, map[string]any{"limits": map[string]any{"memory": "1Gi"}}, dig(t, spec, "containers", 0, "resources"),
			"no requests merged in from poolDefaults")
		assert.Nil(t, dig(t, spec, "nodeSelector"), "nodeSelector: {} clears poolDefaults'")
		assert.Equal(t, "ci", dig(t, pool, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance"),
			"pool pods carry the release")
	})
	t.Run("NOTES says a policy is not applied without the controller", func(t *testing.T) {
		values := []string{"pools[0].name=a", "pools[0].image=a:1", "pools[0].policy=- idle_count: 2", "controller.enabled=false"}
		n := notes(t, values...)
		assert.NotContains(t, n, "sized by the pool controller")
		assert.Contains(t, n, "a: image a:1, for gitlab, 1 idle (its policy is not applied: controller.enabled is false)")
		n = notes(t, values[:3]...)
		assert.Contains(t, n, "a: image a:1, for gitlab, sized by the pool controller")
	})
	t.Run("large numbers render as integers", func(t *testing.T) {
		out, err := template(t, "controller: {budget: {pods: 2000000}}\npools:\n- {name: a, image: a:1, replicas: 1000000}\n")
		require.NoError(t, err, "%s", out)
		assert.Contains(t, out, "--budget-pods=2000000")
		assert.Contains(t, out, "replicas: 1000000")
	})
	t.Run("an API server older than the chart's kubeVersion is refused", func(t *testing.T) {
		out, err := template(t, "", "--kube-version", "1.29.0")
		require.Error(t, err, "%s", out)
		assert.Contains(t, out, "kubeVersion")
	})
}
