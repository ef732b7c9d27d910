// Package gitlab is GitLab Runner's Custom executor on warm pods: the four
// programs the runner calls (config, prepare, run SCRIPT STAGE, cleanup)
// as one [Driver]: run and cleanup over a session.Cluster (the job's
// multiplexer, else a direct client), config and prepare through
// [KubePods] over an executor.Cluster (package pool's client-go one; tests
// use a fake). The in-pod side is the warmpod binary's job protocol: job start,
// job stage (one exec per stage), job cancel --stage, job end.
//
// The contract with the runner, as GitLab documents it for the Custom
// executor and as ../shared/gitlab-runner's real runner shows it:
//   - job variables arrive as CUSTOM_ENV_<KEY> environment variables (a
//     File variable's twin holds its content, not a path);
//   - config prints one JSON document on stdout;
//   - run is called once per stage with the path of a generated script
//     (bash, with sh as the fallback) and the stage name; its stdout and
//     stderr are the job's trace;
//   - a failed script exits with $BUILD_FAILURE_EXIT_CODE, writing the
//     script's real code to $BUILD_EXIT_CODE_FILE when that is set (so
//     allow_failure: exit_codes works); anything about the pod, the
//     cluster or a stream exits with $SYSTEM_FAILURE_EXIT_CODE;
//   - on cancel or timeout the runner sends SIGTERM to run's process group,
//     SIGKILL after its graceful kill timeout; cleanup is always called last.
package gitlab

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Env is the environment of one driver call: os.Environ() in production.
type Env map[string]string

// EnvFrom builds an Env from "KEY=VALUE" entries.
func EnvFrom(kv []string) Env {
	e := make(Env, len(kv))
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if ok {
			e[k] = v
		}
	}
	return e
}

// Job is what the driver needs of a job, read from the CUSTOM_ENV_*
// variables the runner passes.
type Job struct {
	// ID is CI_JOB_ID; it names the job in the pod (warmpod's lease) and
	// labels the pod.
	ID string
	// Token is CI_JOB_TOKEN: it goes to the pod on job start's stdin only.
	Token string
	// Image is CI_JOB_IMAGE, the job's image: (empty: the default pool).
	Image string
	// Timeout is CI_JOB_TIMEOUT (seconds in the runner's variable); zero
	// when the runner did not say.
	Timeout time.Duration
	// ProjectID is CI_PROJECT_ID (informational: pod labels).
	ProjectID string
}

// JobFromEnv reads the job from the runner's CUSTOM_ENV_* variables.
// Errors: CI_JOB_ID missing or not a valid warmpod job id; CI_JOB_TIMEOUT
// not a number of seconds.
func JobFromEnv(e Env) (Job, error) {
	j := Job{
		ID:        e["CUSTOM_ENV_CI_JOB_ID"],
		Token:     e["CUSTOM_ENV_CI_JOB_TOKEN"],
		Image:     strings.TrimSpace(e["CUSTOM_ENV_CI_JOB_IMAGE"]),
		ProjectID: e["CUSTOM_ENV_CI_PROJECT_ID"],
	}
	if j.ID == "" {
		return Job{}, fmt.Errorf("CUSTOM_ENV_CI_JOB_ID is not set: is this called by GitLab Runner's Custom executor?")
	}
	if !validLabelValue(j.ID) {
		return Job{}, fmt.Errorf("CUSTOM_ENV_CI_JOB_ID %q: want letters, digits, '.', '_' or '-', at most 63 bytes", j.ID)
	}
	if t := e["CUSTOM_ENV_CI_JOB_TIMEOUT"]; t != "" {
		s, err := strconv.ParseInt(t, 10, 64)
		if err != nil || s < 0 {
			return Job{}, fmt.Errorf("CUSTOM_ENV_CI_JOB_TIMEOUT %q: want seconds", t)
		}
		j.Timeout = time.Duration(s) * time.Second
	}
	return j, nil
}

// validLabelValue: a Kubernetes label value (at most 63 bytes of
// [A-Za-z0-9._-], alphanumeric at both ends), which is also a valid warmpod
// job id.
func validLabelValue(v string) bool {
	if v == "" || len(v) > 63 {
		return false
	}
	for i, c := range []byte(v) {
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alnum && (i == 0 || i == len(v)-1 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// ExitCodes are the runner's exit-code contract for run and prepare.
type ExitCodes struct {
	// BuildFailure is $BUILD_FAILURE_EXIT_CODE: the job's script failed.
	BuildFailure int
	// SystemFailure is $SYSTEM_FAILURE_EXIT_CODE: the pod, the cluster or
	// a stream failed.
	SystemFailure int
	// ExitCodeFile is $BUILD_EXIT_CODE_FILE: where the script's real exit
	// code goes (empty: the runner did not ask).
	ExitCodeFile string
}

// ExitCodesFromEnv reads the runner's exit-code variables; when the runner
// did not set them (a driver run by hand) it uses 1 and 2.
func ExitCodesFromEnv(e Env) ExitCodes {
	c := ExitCodes{BuildFailure: 1, SystemFailure: 2, ExitCodeFile: e["BUILD_EXIT_CODE_FILE"]}
	if v, err := strconv.Atoi(e["BUILD_FAILURE_EXIT_CODE"]); err == nil {
		c.BuildFailure = v
	}
	if v, err := strconv.Atoi(e["SYSTEM_FAILURE_EXIT_CODE"]); err == nil {
		c.SystemFailure = v
	}
	return c
}

// BuildError is a failed script: Code is its real exit code.
type BuildError struct{ Code int }

func (e *BuildError) Error() string { return fmt.Sprintf("the script exited with %d", e.Code) }
