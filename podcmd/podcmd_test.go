package podcmd

import (
	"encoding/json"
	"flag"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/argv.golden")

// examples are one of each command with every field set, and the
// variants whose optional flags are left out. cmd/warmpod's tests run
// each line of the golden file through warmpod's own parser.
func examples() map[string][]string {
	const bin, sum = "/usr/local/bin/warmpod", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	return map[string][]string{
		"start":               JobStart{Bin: bin}.Argv(),
		"stage":               JobStage{Bin: bin, Job: "4711", Stage: "build_script", Size: 1234, SHA256: sum, Offset: 99, Shell: "bash"}.Argv(),
		"stage, auto shell":   JobStage{Bin: "warmpod", Job: "4711", Stage: "step-1", Size: 0, SHA256: sum}.Argv(),
		"cancel":              JobCancel{Bin: bin, Job: "4711", Stage: "build_script", Grace: 5 * time.Second}.Argv(),
		"cancel, pod's grace": JobCancel{Bin: bin, Job: "4711", Stage: "build_script"}.Argv(),
		"end":                 JobEnd{Bin: bin, Job: "4711"}.Argv(),
		"status":              JobStatus{Bin: bin, Job: "4711"}.Argv(),
		"attach":              JobAttach{Bin: bin, Job: "4711"}.Argv(),
		"exec":                JobExec{Bin: bin, Job: "4711", Command: []string{"sh", "-c", "tar -xf -"}}.Argv(),
		"put":                 JobPut{Bin: bin, Dest: "/__w/.warmpod-work.0001", Job: "4711", Size: 1 << 20, SHA256: sum, Mode: 0o600}.Argv(),
		"limits":              JobLimits{Bin: bin, Within: 10 * time.Second, Shares: 1024, Weights: []uint64{39, 79}, Quota: 100000, Memory: 1 << 30}.Argv(),
		"limits, memory only": JobLimits{Bin: bin, Within: 90 * time.Second, Memory: 512 << 20}.Argv(),
	}
}

func TestArgvGolden(t *testing.T) {
	ex := examples()
	var b strings.Builder
	for _, name := range sortedKeys(ex) {
		line, err := json.Marshal(ex[name])
		require.NoError(t, err)
		b.WriteString(name + "\t" + string(line) + "\n")
	}
	const golden = "testdata/argv.golden"
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), b.String(), "the pod's command lines changed: an older warmpod in a pool pod would refuse them (go test ./podcmd -update rewrites %s)", golden)
}

// Nothing to wait for is no command at all.
func TestLimitsWithNothingSetIsNoCommand(t *testing.T) {
	assert.Nil(t, JobLimits{Bin: "warmpod", Within: time.Second}.Argv())
	assert.Nil(t, JobLimits{Bin: "warmpod", Within: time.Second, Weights: []uint64{1}}.Argv(), "weights go with shares")
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
