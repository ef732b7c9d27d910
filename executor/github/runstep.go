package github

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/tokens"
)

// workMount is where the runner's _work is in the job container (the
// runner's path translation: _work → /__w).
const workMount = "/__w"

// fileCommandVars are the step's file commands: files the runner creates
// empty before a step and reads after it (FileCommandManager), which a
// hook without a shared volume must carry into the pod and back.
var fileCommandVars = []string{"GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"}

// runScriptStep runs one step as one stage in the job's pod: a script,
// on the exec's stdin, that writes the step's script and its fresh file
// command files at their container paths, exports the step's environment,
// prepends its PATH, changes to its working directory and execs its entry
// point. The output streams as it comes (a broken stream reattaches
// without running the step again); the step's exit status is the hook's;
// the file commands come back to the runner's files after the step, also
// after a failure or a cancel.
func (h *Hook) runScriptStep(ctx context.Context, st *State, args ScriptStepArgs, cancel <-chan struct{}) (*Response, error) {
	if args.EntryPoint == "" {
		return nil, fmt.Errorf("%w: run_script_step without an entryPoint", ErrInput)
	}
	work, err := h.workDir()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, a := range args.EntryPointArgs {
		if host, ok := hostPath(work, a); ok && strings.HasPrefix(a, workMount+"/_temp/") {
			if b, err := os.ReadFile(host); err == nil {
				files[a] = b
			}
		}
	}
	var back []string
	for _, v := range fileCommandVars {
		cp := args.EnvironmentVariables[v]
		host, ok := hostPath(work, cp)
		if !ok {
			continue
		}
		b, err := os.ReadFile(host)
		if err != nil {
			continue // the runner did not create it: nothing to bring back
		}
		files[cp] = b
		back = append(back, cp)
	}
	var script bytes.Buffer
	writeStepScript(&script, files, args.EnvironmentVariables, args.PrependPath, args.WorkingDirectory, append([]string{args.EntryPoint}, args.EntryPointArgs...))
	core := h.core()
	final, runErr := core.RunStage(ctx, st.Pod, st.Job, stageName(), script.Bytes(), h.Stdout, debugWriter{h.Stdout}, cancel)
	clear(script.Bytes()) // it holds the step's secrets
	// The file commands come back whatever the step did: the runner
	// processes them after a failed step too.
	if err := h.fetchFiles(context.WithoutCancel(ctx), core, st, work, back); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return nil, runErr
	}
	if code := *final.ExitCode; code != 0 {
		return nil, &StepError{Code: code}
	}
	return nil, nil
}

// stageName is a fresh in-pod stage name: one hook call is one step, and
// the runner never calls it again for the same step.
func stageName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "step-" + hex.EncodeToString(b)
}

// hostPath maps a container path under /__w to the runner's _work on this
// host; false for any other path, or one that climbs out of _work.
func hostPath(work, containerPath string) (string, bool) {
	rel, ok := strings.CutPrefix(containerPath, workMount+"/")
	if !ok || containerPath == "" {
		return "", false
	}
	rel = filepath.Clean(rel)
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.Join(work, rel), true
}

// writeStepScript writes the stage script of a step: files at their
// container paths (exact bytes, through printf: no here-document adds a
// newline), the step's environment exported (names warmpod cannot export
// are left out: the runner's own are all POSIX names), PATH prepended,
// the working directory, and the entry point exec'd, so the stage's exit
// status is the step's and a cancel's SIGTERM reaches the step itself.
func writeStepScript(w *bytes.Buffer, files map[string][]byte, env map[string]string, prepend []string, workDir string, argv []string) {
	w.WriteString("# warmpod-github: one Actions step\n")
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "mkdir -p %s && printf '%%s' %s > %s || exit 1\n", tokens.Quote(filepath.Dir(p)), tokens.Quote(string(files[p])), tokens.Quote(p))
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if posixName.MatchString(k) {
			fmt.Fprintf(w, "export %s=%s\n", k, tokens.Quote(env[k]))
		}
	}
	if len(prepend) > 0 {
		fmt.Fprintf(w, "export PATH=%s:\"$PATH\"\n", tokens.Quote(strings.Join(prepend, ":")))
	}
	if workDir != "" {
		fmt.Fprintf(w, "cd %s || exit 1\n", tokens.Quote(workDir))
	}
	w.WriteString("exec")
	for _, a := range argv {
		w.WriteString(" " + tokens.Quote(a))
	}
	w.WriteString("\n")
}

// fetchFiles brings the step's file command files back from the pod to
// the runner's files, in one exec: for each path the pod prints its size
// in bytes on a line of its own and then its bytes (-1: the step removed
// it).
func (h *Hook) fetchFiles(ctx context.Context, core *executor.Core, st *State, work string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	const script = `for f in "$@"; do if [ -f "$f" ]; then wc -c < "$f"; cat "$f"; else echo -1; fi; done`
	argv := append([]string{"sh", "-c", script, "sh"}, paths...)
	var out, errb bytes.Buffer
	code, err := h.Cluster.Exec(ctx, st.Pod, argv, nil, &out, &errb)
	if err != nil || code != 0 {
		return executor.Errorf("bring back the step's file commands from pod %s: exit %d %v %s", st.Pod.Name, code, err, strings.TrimSpace(errb.String()))
	}
	r := bufio.NewReader(&out)
	for _, p := range paths {
		line, err := r.ReadString('\n')
		if err != nil {
			return executor.Errorf("file commands from pod %s: short answer", st.Pod.Name)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return executor.Errorf("file commands from pod %s: bad size %q", st.Pod.Name, line)
		}
		host, _ := hostPath(work, p)
		if n < 0 {
			_ = os.WriteFile(host, nil, 0o644)
			continue
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return executor.Errorf("file commands from pod %s: %s is short", st.Pod.Name, p)
		}
		if err := os.WriteFile(host, b, 0o644); err != nil {
			return executor.Errorf("file command %s: %v", host, err)
		}
	}
	return nil
}
