//go:build !percall

package gitlab

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// jobPayload is what the driver reads of the job payload the runner
// writes to $JOB_RESPONSE_FILE (GitLab Runner's common/spec.Job, the
// Custom executor's JobResponseFileVariable): the parts that make the
// runner's generated stages call the helper binary.
type jobPayload struct {
	Artifacts []struct {
		Paths     []string `json:"paths"`
		Untracked bool     `json:"untracked"`
	} `json:"artifacts"`
	Cache []struct {
		Paths     []string `json:"paths"`
		Untracked bool     `json:"untracked"`
	} `json:"cache"`
	Dependencies []struct {
		ArtifactsFile struct {
			Filename string `json:"filename"`
		} `json:"artifacts_file"`
	} `json:"dependencies"`
}

// HelperNeeds tells what of the job needs GitLab Runner's helper binary in
// the pod, read from the job payload at $JOB_RESPONSE_FILE: "caches",
// "artifacts" (to upload), "artifacts of dependencies" (to download);
// none, or no $JOB_RESPONSE_FILE (a driver called by hand), is nil. The
// runner's scripts skip each of these with a warning ("Missing
// gitlab-runner. Uploading artifacts is disabled.") and let the job
// succeed when the binary is missing, so the driver has to ask first.
// Errors: the file cannot be read or is not the runner's JSON.
func HelperNeeds(e Env) ([]string, error) {
	file := e["JOB_RESPONSE_FILE"]
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("the job payload ($JOB_RESPONSE_FILE): %w", err)
	}
	defer f.Close()
	var p jobPayload
	if err := json.NewDecoder(f).Decode(&p); err != nil {
		return nil, fmt.Errorf("the job payload ($JOB_RESPONSE_FILE) %s: %w", file, err)
	}
	var needs []string
	for _, c := range p.Cache {
		if len(c.Paths) > 0 || c.Untracked {
			needs = append(needs, "caches")
			break
		}
	}
	for _, a := range p.Artifacts {
		if len(a.Paths) > 0 || a.Untracked {
			needs = append(needs, "artifacts")
			break
		}
	}
	for _, d := range p.Dependencies {
		if d.ArtifactsFile.Filename != "" {
			needs = append(needs, "artifacts of dependencies")
			break
		}
	}
	return needs, nil
}

// HasRunnerHelper tells whether pods of p have GitLab Runner's helper
// binary, and how the driver knows: the template's
// [poolapi.AnnotationRunnerHelper] when set, else an init container that copies
// it in (its image or command names gitlab-runner-helper, as
// deploy/pool.yaml's install-gitlab-runner-helper does), else a build
// image that is GitLab Runner's own (gitlab-runner, gitlab-runner-helper).
func HasRunnerHelper(p pool.Pool) (bool, string) {
	switch v := p.Template.Annotations[poolapi.AnnotationRunnerHelper]; v {
	case "true", "false":
		return v == "true", fmt.Sprintf("its template's annotation %s is %q", poolapi.AnnotationRunnerHelper, v)
	}
	for _, c := range p.Template.Spec.InitContainers {
		if imageIs(c.Image, "gitlab-runner-helper") || mentions(c, "gitlab-runner-helper") {
			return true, fmt.Sprintf("init container %s copies it in", c.Name)
		}
	}
	if c := p.BuildContainer(&p.Template); c != nil && (imageIs(c.Image, "gitlab-runner") || imageIs(c.Image, "gitlab-runner-helper")) {
		return true, "its build image is GitLab Runner's"
	}
	return false, fmt.Sprintf("no init container of its template copies gitlab-runner-helper in, and it has no %s annotation", poolapi.AnnotationRunnerHelper)
}

// imageIs tells whether image's repository (without registry path, tag
// or digest) is name.
func imageIs(image, name string) bool {
	image, _, _ = strings.Cut(image, "@")
	base := path.Base(image)
	base, _, _ = strings.Cut(base, ":")
	return base == name
}

// mentions tells whether a word of c's command or args has name as its
// base name ("cp /usr/bin/gitlab-runner-helper /opt/warmpod/gitlab-runner").
func mentions(c corev1.Container, name string) bool {
	for _, w := range append(append([]string(nil), c.Command...), c.Args...) {
		for _, f := range strings.Fields(w) {
			if path.Base(f) == name {
				return true
			}
		}
	}
	return false
}

// checkHelper refuses, before anything is claimed, a job whose artifacts
// or caches p's pods cannot handle: without the helper binary the
// runner's stages would skip them and report the job a success.
func checkHelper(e Env, p pool.Pool) error {
	needs, err := HelperNeeds(e)
	if err != nil || len(needs) == 0 {
		return err
	}
	has, why := HasRunnerHelper(p)
	if has {
		return nil
	}
	return fmt.Errorf("the job has %s, which GitLab Runner's helper binary (gitlab-runner on the build container's PATH) handles, but pool %s's pods have none (%s): add deploy/pool.yaml's install-gitlab-runner-helper init container to the pool, or annotate its template %s: \"true\" if its image has gitlab-runner on PATH",
		strings.Join(needs, " and "), p.Name, why, poolapi.AnnotationRunnerHelper)
}

// stagingVariables are the job variables the driver adds for the helper's
// stages: ARCHIVER_STAGING_DIR, where gitlab-runner-helper stages what it
// moves (fastzip's archive chunks before an upload or onto the cache
// volume, a downloaded artifacts archive before it is extracted), set to
// buildsDir. Without it the helper stages in $TMPDIR: on the container's
// disk, or, where PID 1 cannot make it there (a read-only root file
// system), on the pod's memory-backed run volume (64Mi in
// deploy/pool.yaml), where a 100 MiB artifact or cache failed with "no
// space left on device" and a smaller one took pod memory. The stock
// Kubernetes executor's helper stages in its container's /tmp, on disk;
// buildsDir is the disk volume every job writes anyway, whatever the root
// file system. A job that
// sets ARCHIVER_STAGING_DIR itself wins: the runner's stage scripts export
// the job's variables after the pod's environment. None for a job that
// does not call the helper. Errors: HelperNeeds's.
func stagingVariables(e Env, buildsDir string) ([]control.JobVariable, error) {
	needs, err := HelperNeeds(e)
	if err != nil || len(needs) == 0 || buildsDir == "" {
		return nil, err
	}
	return []control.JobVariable{{Key: "ARCHIVER_STAGING_DIR", Value: buildsDir}}, nil
}
