package charts

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/pools"
)

// Every query of the shipped Grafana dashboard names only metrics the pool
// controller exports, and the chart renders it only when asked.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	m, err := pools.NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	exported := m.Names()
	require.Contains(t, exported, "warmpod_pool_claims_total")

	raw, err := os.ReadFile("warmpod/dashboards/warmpod-pools.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	var exprs []string
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && strings.Contains(q, "warmpod_") {
			exprs = append(exprs, q)
		}
	}
	name := regexp.MustCompile(`\bwarmpod_[a-z_]+`)
	used := 0
	for _, e := range exprs {
		names := name.FindAllString(e, -1)
		assert.NotEmpty(t, names, "query %q names no warmpod metric", e)
		for _, n := range names {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suf); ok && slices.Contains(exported, b) {
					base = b
				}
			}
			assert.Contains(t, exported, base, "query %q", e)
			used++
		}
	}
	assert.Greater(t, used, 10)

	out, err := template(t, "")
	require.NoError(t, err, "%s", out)
	assert.Empty(t, objects(t, out)["ConfigMap"], "off by default")
	out, err = template(t, "controller: {grafanaDashboard: {enabled: true}}\n")
	require.NoError(t, err, "%s", out)
	cms := objects(t, out)["ConfigMap"]
	require.Len(t, cms, 1)
	assert.Equal(t, "1", dig(t, cms[0], "metadata", "labels", "grafana_dashboard"))
	var again map[string]any
	require.NoError(t, json.Unmarshal([]byte(dig(t, cms[0], "data", "warmpod-pools.json").(string)), &again), "the ConfigMap holds the dashboard's JSON")
	assert.Equal(t, "warmpod-pools", again["uid"])
}
