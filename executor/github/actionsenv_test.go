package github

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/control"
)

// GitHub documents GITHUB_ACTIONS and CI as always set; the runner leaves
// them to whoever makes the container (its Docker path, the upstream k8s
// hook): GITHUB_ACTIONS is true whatever the workflow says, CI is the
// workflow's when it sets it.
func TestActionsEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"none", nil, map[string]string{"GITHUB_ACTIONS": "true", "CI": "true"}},
		{"the container's own kept", map[string]string{"HOME": "/github/home", "A": "1"},
			map[string]string{"HOME": "/github/home", "A": "1", "GITHUB_ACTIONS": "true", "CI": "true"}},
		{"GITHUB_ACTIONS is always true", map[string]string{"GITHUB_ACTIONS": "false"}, map[string]string{"GITHUB_ACTIONS": "true", "CI": "true"}},
		{"the workflow's CI wins", map[string]string{"CI": "false"}, map[string]string{"GITHUB_ACTIONS": "true", "CI": "false"}},
		{"an empty CI is the workflow's too", map[string]string{"CI": ""}, map[string]string{"GITHUB_ACTIONS": "true", "CI": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before map[string]string
			if tc.in != nil {
				before = map[string]string{}
				for k, v := range tc.in {
					before[k] = v
				}
			}
			assert.Equal(t, tc.want, actionsEnv(tc.in))
			assert.Equal(t, before, tc.in, "the input is not changed")
		})
	}
}

// The job's variables (job start) and a cold pod's service containers
// carry GITHUB_ACTIONS and CI, as the upstream hook's containers do.
func TestPrepareJobSetsGitHubActionsAndCI(t *testing.T) {
	r := newRunner(t)
	f := &fakeCluster{}
	h, _, _ := r.hook(f)
	code, _ := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1",
		EnvironmentVariables: map[string]string{"CI": "no"}},
		Services: []Container{{Image: "localhost/hooks/svc:v1"}}}, nil, nil)
	require.Equal(t, 0, code)
	require.Len(t, f.starts, 1)
	assert.Equal(t, []control.JobVariable{{Key: "CI", Value: "no"}, {Key: "GITHUB_ACTIONS", Value: "true"}}, f.starts[0].Variables)
	require.Len(t, f.Colds(), 1)
	cs := f.Colds()[0].Template.Spec.Containers
	require.Len(t, cs, 2)
	assert.Equal(t, []corev1.EnvVar{{Name: "CI", Value: "true"}, {Name: "GITHUB_ACTIONS", Value: "true"}}, cs[1].Env)
}
