package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// warmpodKey finds warmpod's own label and annotation keys in a manifest
// (a key escaped for JSONPath, warmpod\.dev/…, is prose for kubectl).
var warmpodKey = regexp.MustCompile(`warmpod\.dev/[A-Za-z0-9._-]+`)

// The chart and deploy/ write the pool contract's keys as literals (YAML
// has no constants): each one they render is a key of package poolapi, so
// a key renamed in the code, or misspelt in a template, fails here instead
// of leaving pods no driver or controller finds.
func TestRenderedKeysAreThePoolContracts(t *testing.T) {
	texts := map[string]string{}
	for _, values := range []string{"", "testdata/two-pools.yaml", "testdata/one-init.yaml"} {
		args := []string{"template", "ci", "warmpod", "--namespace", "ci",
			"--set", "networkPolicy.enabled=true,github.enabled=true,gitlab.enabled=true"}
		if values != "" {
			args = append(args, "-f", values)
		}
		out, err := run(t, args...)
		require.NoError(t, err, "%s", out)
		texts["helm template "+values] = out
	}
	manifests, err := filepath.Glob("../deploy/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		texts[m] = string(b)
	}
	keys := poolapi.Keys()
	seen := map[string]bool{}
	for src, text := range texts {
		for _, k := range warmpodKey.FindAllString(text, -1) {
			seen[k] = true
			assert.True(t, slices.Contains(keys, k), "%s renders %s, which is not a key of package poolapi", src, k)
		}
	}
	// The test reads what it should: the keys every pool carries.
	for _, k := range []string{poolapi.LabelPool, poolapi.LabelState, poolapi.AnnotationPolicy, poolapi.AnnotationDefaultPool} {
		assert.True(t, seen[k], "%s rendered nowhere", k)
	}
}
