package github

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

func TestOptionsResources(t *testing.T) {
	for _, tc := range []struct {
		name, options  string
		requests, caps string // executor.Describe of each, "" for none
		note, err      string
	}{
		{"cpus and memory", "--cpus 1.5 --memory 512m", "", "limits cpu=1500m memory=512Mi", "", ""},
		{"inline values", "--cpus=2 --memory=1g", "", "limits cpu=2 memory=1Gi", "", ""},
		{"-m, attached", "-m512m", "", "limits memory=512Mi", "", ""},
		{"-m, separate; a size with b", "-m 1gb", "", "limits memory=1Gi", "", ""},
		{"reservation", "--memory-reservation 256m", "requests memory=256Mi", "", "", ""},
		{"bytes", "--memory 104857600", "", "limits memory=100Mi", "", ""},
		{"Kubernetes' spelling, as Docker reads it", "--memory 2Gi --memory-reservation 512MiB", "requests memory=512Mi", "limits memory=2Gi", "", ""},
		{"GiB, a decimal, a blank", "-m '1.5 GiB'", "", "limits memory=1536Mi", "", ""},
		{"a reservation above the limit", "--memory 1g --memory-reservation 2g", "", "", "", "--memory-reservation 2Gi is above --memory 1Gi"},
		{"not a size", "--memory g", "", "", "", "not a size"},
		{"others left out, named once", "--user 1000 --cpus 1 --privileged --user=0 -v /x:/y", "", "limits cpu=1", "container.options --privileged --user -v left out", ""},
		{"quoted words", `--label "a b" --cpus '0.5'`, "", "limits cpu=500m", "--label left out", ""},
		{"no value", "--cpus", "", "", "", "--cpus needs a value"},
		{"not a number", "--cpus lots", "", "", "", "not a number of CPUs"},
		{"zero cpus", "--cpus 0", "", "", "", "must be above 0"},
		{"negative cpus", "--cpus=-1", "", "", "", "must be above 0"},
		{"below a millicore", "--cpus 0.0001", "", "", "", "below a millicore"},
		{"NaN", "--cpus NaN", "", "", "", "not a number"},
		{"unit", "--memory 5x", "", "", "", `unit "x"`},
		{"too little memory", "--memory 4m", "", "", "", "below 6m"},
		{"too much memory", "--memory 2p", "", "", "", "more memory than any node"},
		{"unterminated quote", `--cpus "1`, "", "", "", "unterminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, caps, notes, err := optionsResources(tc.options)
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrInput)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.requests, executor.Describe(corev1.ResourceRequirements{Requests: req}))
			assert.Equal(t, tc.caps, executor.Describe(corev1.ResourceRequirements{Limits: caps}))
			if tc.note == "" {
				assert.Empty(t, notes)
			} else {
				require.Len(t, notes, 1)
				assert.Contains(t, notes[0], tc.note)
			}
		})
	}
}

func TestSplitOptions(t *testing.T) {
	got, err := splitOptions(` --a  'b c' "d \"e\"" f\ g  `)
	require.NoError(t, err)
	assert.Equal(t, []string{"--a", "b c", `d "e"`, "f g"}, got)
}

func FuzzOptionsResources(f *testing.F) {
	for _, s := range []string{"--cpus 1", `-m512m --label "x`, "--memory=1.5g", "'", `\`, "--cpus=1e300"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		req, caps, _, err := optionsResources(s)
		if err != nil {
			assert.ErrorIs(t, err, ErrInput)
			return
		}
		for _, l := range []corev1.ResourceList{req, caps} {
			for n, q := range l {
				assert.Positive(t, q.Sign(), "%s %s from %q", n, q.String(), s)
			}
		}
	})
}

func TestExtension(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
		return p
	}
	for _, tc := range []struct {
		name, file, options string
		res                 string // executor.Describe of the resources
		caps                string
		note, err           string
	}{
		{"the job container's resources", `
spec:
  containers:
  - name: $job
    resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {memory: 1Gi}}
`, "", "requests cpu=500m memory=256Mi, limits memory=1Gi", "", "", ""},
		{"options over the extension", `
spec:
  containers:
  - name: $job
    resources: {requests: {memory: 256Mi}}
`, "--memory-reservation 512m --cpus 2", "requests memory=512Mi", "limits cpu=2", "", ""},
		{"what warmpod leaves out is named", `
metadata: {labels: {team: a}}
spec:
  nodeSelector: {disk: ssd}
  containers:
  - name: $job
    env: [{name: A, value: b}]
    resources: {limits: {cpu: "1"}}
  - name: sidecar
    image: busybox
`, "", "limits cpu=1", "", `sets metadata, container "$job" fields other than resources, container "sidecar", spec fields other than containers`, ""},
		{"no $job container: no resources", `
spec:
  containers:
  - name: $other
`, "", "", "", `container "$other"`, ""},
		{"a misspelt field: left out, said", `
spec:
  containers:
  - name: $job
    resource: {limits: {cpu: "1"}}
`, "", "", "", `unknown field "resource"`, ""},
		{"apiVersion and kind: left out, said", `
apiVersion: v1
kind: PodTemplate
spec:
  containers:
  - name: $job
    resources: {limits: {cpu: "1"}}
`, "", "limits cpu=1", "", `unknown field "apiVersion"`, ""},
		{"not YAML", "spec: [", "", "", "", "", "not a pod template"},
		{"a bad quantity", `
spec:
  containers:
  - name: $job
    resources: {limits: {cpu: lots}}
`, "", "", "", "", "not a pod template"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{TemplateEnv: write(strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.file)}
			opts := tc.options
			res, caps, notes, err := jobResources(env, &opts)
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ErrInput)
				assert.Contains(t, err.Error(), tc.err)
				assert.Contains(t, err.Error(), TemplateEnv, "the error names where the file came from")
				return
			}
			require.NoError(t, err)
			got := ""
			if res != nil {
				got = executor.Describe(*res)
			}
			assert.Equal(t, tc.res, got)
			assert.Equal(t, tc.caps, executor.Describe(corev1.ResourceRequirements{Limits: caps}))
			if tc.note == "" {
				assert.Empty(t, notes)
			} else {
				require.Len(t, notes, 1)
				assert.Contains(t, notes[0], tc.note)
			}
		})
	}
	t.Run("a missing file", func(t *testing.T) {
		_, _, _, err := jobResources(map[string]string{TemplateEnv: filepath.Join(dir, "nope.yaml")}, nil)
		assert.ErrorIs(t, err, ErrInput)
		assert.Contains(t, err.Error(), "nope.yaml")
	})
}

const resourcePools = `apiVersion: apps/v1
kind: Deployment
metadata: {name: job}
spec:
  selector: {matchLabels: {warmpod.dev/pool: job, warmpod.dev/state: idle}}
  template:
    metadata:
      labels: {warmpod.dev/pool: job, warmpod.dev/state: idle}
    spec:
      containers:
      - name: job
        image: localhost/hooks/job:v1
        command: [/warmpod/warmpod]
        resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 256Mi}}
`

// prepare_job with container.options: a warm pod is resized in place to
// the job's resources; a job no node can hold is refused before any
// claim; an infeasible resize sends the job to a cold pod with them.
func TestPrepareJobResources(t *testing.T) {
	node := pool.Node{Name: "n1", Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}
	for _, tc := range []struct {
		name, options string
		resizeErr     error
		code          int
		resized       string // what the claim resized to
		cold          string // the cold pod's job container resources
		stderr        string // "": no ::error:: line
	}{
		{"resized in place", "--cpus 1.5 --memory 512m", nil, 0, "requests cpu=100m memory=64Mi, limits cpu=1500m memory=512Mi", "", ""},
		{"a request as high as the cap", "--memory-reservation 300m --memory 300m", nil, 0, "requests cpu=100m memory=300Mi, limits memory=300Mi", "", ""},
		{"no node can hold it: refused, nothing claimed", "--memory-reservation 8g --memory 8g", nil, 1, "", "", "more than any node of pool job can allocate"},
		{"infeasible: a cold pod with them", "--cpus 1", pool.ErrResizeInfeasible, 0, "requests cpu=100m memory=64Mi, limits cpu=1 memory=256Mi", "requests cpu=100m memory=64Mi, limits cpu=1 memory=256Mi", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t)
			f := &fakeCluster{Cluster: fake.Cluster{Warm: []poolapi.Pod{{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod", Warm: true, Pool: "job"}}, NodeList: []pool.Node{node},
				OnResize: func(poolapi.Pod, corev1.ResourceRequirements) error { return tc.resizeErr }}}
			h, _, errb := r.hook(f)
			set, err := pool.Parse(strings.NewReader(resourcePools))
			require.NoError(t, err)
			h.Pods.(*KubePods).Pools = set
			opts := tc.options
			code, _ := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1", CreateOptions: &opts}}, nil, nil)
			require.Equal(t, tc.code, code, errb.String())
			if tc.stderr == "" {
				assert.NotContains(t, errb.String(), "::error::")
			} else {
				assert.Contains(t, errb.String(), "::error::")
				assert.Contains(t, errb.String(), tc.stderr)
			}
			if tc.resized == "" {
				assert.Empty(t, f.Resized())
				assert.Equal(t, 1, f.Left(), "nothing claimed")
				assert.Empty(t, f.Colds())
				return
			}
			require.Len(t, f.Resized(), 1)
			assert.Equal(t, tc.resized, executor.Describe(f.Resized()[0].Want))
			if tc.cold == "" {
				assert.Empty(t, f.Colds())
				return
			}
			require.Len(t, f.Colds(), 1)
			assert.Equal(t, tc.cold, executor.Describe(f.Colds()[0].BuildContainer(&f.Colds()[0].Template).Resources))
		})
	}
}
