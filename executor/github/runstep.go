package github

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/internal/shquote"
)

// posixName is the rule warmpod's job start applies to variable names.
var posixName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
		// The step's script: a file directly in _work/_temp (the runner
		// writes _temp/GUID.sh). Nothing else of the host is read: an
		// argument is the workflow's to choose (`shell: bash {0} …`).
		if rel, ok := tempRel(a); ok && !strings.Contains(rel[len("_temp/"):], "/") {
			if b, err := readRunnerFile(work, rel); err == nil {
				files[a] = b
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: step file %s: %v", ErrInput, a, err)
			}
		}
	}
	var back []string
	for _, v := range fileCommandVars {
		cp := args.EnvironmentVariables[v]
		rel, ok := tempRel(cp)
		if !ok {
			continue
		}
		b, err := readRunnerFile(work, rel)
		if err != nil {
			continue // the runner did not create it: nothing to bring back
		}
		files[cp] = b
		back = append(back, cp)
	}
	// The file commands come back in the stage's own stream, after a
	// marker line only this step's script knows: no second exec per step.
	tap := &fileTap{w: h.Stdout, marker: []byte(fileMarker())}
	var script bytes.Buffer
	writeStepScript(&script, files, args.EnvironmentVariables, args.PrependPath, args.WorkingDirectory, append([]string{args.EntryPoint}, args.EntryPointArgs...), back, string(tap.marker))
	sess := h.session(h.Cluster, st)
	// The stage script is POSIX sh, so sh runs it rather than bash (auto):
	// a shell and a subshell cheaper to start on every step. The job's
	// container has an sh: prepare_job's _work unpack runs one, and so
	// does every step of the runner's default shell.
	sess.Shell = "sh"
	h.trace.stage()
	final, runErr := sess.RunStage(ctx, st.Pod, st.Job, stageName(), script.Bytes(), tap, debugWriter{h.Stdout}, cancel)
	h.trace.final(final)
	clear(script.Bytes()) // it holds the step's secrets
	tap.flush()
	// The file commands come back whatever the step did: the runner
	// processes them after a failed step too.
	if runErr == nil && len(back) > 0 {
		if !tap.found {
			runErr = session.Errorf("the step's file commands did not come back from pod %s (was the step's shell killed?)", st.Pod.Name)
		} else if err := readFiles(work, back, tap.rest.Bytes()); err != nil {
			runErr = session.Errorf("file commands from pod %s: %v", st.Pod.Name, err)
		}
	}
	if runErr != nil {
		return nil, runErr
	}
	if code := *final.ExitCode; code != 0 {
		return nil, &StepError{Code: code}
	}
	return nil, nil
}

// fileMarker is a fresh marker line for a step's file commands.
func fileMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "::warmpod-file-commands-" + hex.EncodeToString(b) + "::"
}

// maxRunnerFile bounds a file of the runner's that a step carries into
// the pod (its script, a file command) and what comes back.
const maxRunnerFile = 16 << 20

// tempRel returns the container path p as a path relative to _work when it
// lies in _work/_temp (after cleaning: /__w/_temp/../x is not in it).
func tempRel(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, workMount+"/")
	if !ok {
		return "", false
	}
	rel := filepath.Clean(rest)
	if !strings.HasPrefix(rel, "_temp/") {
		return "", false
	}
	return rel, true
}

// readRunnerFile reads work/rel, a regular file the runner wrote: not
// through a symbolic link, not a FIFO or a device (opened non-blocking, so
// a FIFO cannot hang the hook), at most maxRunnerFile bytes.
func readRunnerFile(work, rel string) ([]byte, error) {
	f, err := os.OpenFile(filepath.Join(work, rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if st.Size() > maxRunnerFile {
		return nil, fmt.Errorf("%d bytes: more than %d", st.Size(), maxRunnerFile)
	}
	return io.ReadAll(io.LimitReader(f, maxRunnerFile))
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
// newline), the step's environment (exported; a name sh cannot export,
// such as a JavaScript action's INPUT_FETCH-DEPTH, through env(1)), PATH
// prepended, the working directory, and the entry point exec'd. With
// nothing to bring back that is the whole script, so the stage's exit
// status is the step's. Otherwise the step runs in a subshell, and the
// script then prints marker and, for each path of back, its size in bytes
// on a line of its own and its bytes (-1: the step removed it), and exits
// with the step's status; it traps TERM, INT and HUP (noting the cancel)
// so that a cancel, which signals the whole stage, still lets it print
// them (a trap, unlike an ignored signal, is reset in the subshell), after
// the step's other processes have ended (awaitSession).
func writeStepScript(w *bytes.Buffer, files map[string][]byte, env map[string]string, prepend []string, workDir string, argv, back []string, marker string) {
	w.WriteString("# warmpod-github: one Actions step\n")
	// The script holds the step's secrets: gone from the job's directory
	// once the shell has it open, so no later step reads them.
	w.WriteString("rm -f -- \"$0\"\n")
	paths := make([]string, 0, len(files))
	dirs := map[string]bool{}
	for p := range files {
		paths = append(paths, p)
		dirs[filepath.Dir(p)] = true
	}
	sort.Strings(paths)
	// Each directory once, and mkdir (a process) only when it is not
	// there: after a job's first step they all are, and every process the
	// wrapper starts is a step's overhead.
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		fmt.Fprintf(w, "[ -d %[1]s ] || mkdir -p %[1]s || exit 1\n", shquote.Quote(d))
	}
	for _, p := range paths {
		fmt.Fprintf(w, "printf '%%s' %s > %s || exit 1\n", shquote.Quote(string(files[p])), shquote.Quote(p))
	}
	// The step runs in a subshell when the file commands come back after
	// it: its environment (PATH, IFS) must not steer the commands that
	// print them.
	if len(back) > 0 {
		w.WriteString("trap 'cancelled=1' TERM INT HUP\n(\n")
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var odd []string // names sh cannot export (JavaScript actions' INPUT_FETCH-DEPTH): env(1) passes them
	for _, k := range keys {
		switch {
		case posixName.MatchString(k):
			fmt.Fprintf(w, "export %s=%s\n", k, shquote.Quote(env[k]))
		case k != "" && !strings.ContainsAny(k, "=\x00"):
			odd = append(odd, shquote.Quote(k+"="+env[k]))
		}
	}
	if len(prepend) > 0 {
		fmt.Fprintf(w, "export PATH=%s:\"$PATH\"\n", shquote.Quote(strings.Join(prepend, ":")))
	}
	if workDir != "" {
		fmt.Fprintf(w, "cd %s || exit 1\n", shquote.Quote(workDir))
	}
	w.WriteString("exec")
	if len(odd) > 0 {
		w.WriteString(" env " + strings.Join(odd, " "))
	}
	for _, a := range argv {
		w.WriteString(" " + shquote.Quote(a))
	}
	w.WriteString("\n")
	if len(back) == 0 {
		return
	}
	w.WriteString(")\nrc=$?\n")
	w.WriteString(awaitSession)
	fmt.Fprintf(w, "printf '%%s\\n' %s\n", shquote.Quote(marker))
	w.WriteString("for f in")
	for _, p := range back {
		w.WriteString(" " + shquote.Quote(p))
	}
	// An empty file (most file commands of most steps) is said with the
	// shell's builtins: wc and cat are two processes per file.
	w.WriteString("; do if [ -f \"$f\" ]; then if [ -s \"$f\" ]; then wc -c < \"$f\"; cat \"$f\"; else echo 0; fi; else echo -1; fi; done\n")
	w.WriteString("exit \"$rc\"\n")
}

// awaitSession is the part of a step's stage script that, after a cancel,
// waits until no other process of the script's session is left (PID 1
// started the script as a session leader, so its session is $$) before
// the file commands are printed. The step's own shell dies of its TERM at
// once (`sh -e` has no trap), but what it ran may trap the signal and
// still print (a trap's "echo cleaning up"): that output belongs to the
// step, before the marker; after it, it would be taken for the file
// commands. PID 1 kills what is left after its grace period, so the wait
// ends by then; 600 rounds bound it besides. It reads /proc/PID/stat with
// the shell's builtins only (the session is field 6, the fourth after the
// command name's closing parenthesis), so it needs nothing of the image.
const awaitSession = `if [ -n "$cancelled" ]; then
  n=0
  while [ "$n" -lt 600 ]; do
    left=
    for f in /proc/[0-9]*/stat; do
      [ "$f" = "/proc/$$/stat" ] && continue
      { read -r l < "$f"; } 2>/dev/null || continue
      set -- ${l##*) }
      if [ "$4" = "$$" ] && [ "$1" != Z ]; then left=1; break; fi
    done
    [ -z "$left" ] && break
    sleep 0.05 2>/dev/null || sleep 1
    n=$((n+1))
  done
fi
`

// fileTap passes a step's output on to w until marker, and keeps what
// follows it (the file commands) in rest. It holds back only a tail that
// could be the start of marker, so output flows as it comes.
type fileTap struct {
	w      io.Writer
	marker []byte
	held   []byte
	found  bool
	rest   bytes.Buffer
}

// Write always takes all of p (the stage's byte offsets count what
// reached the tap).
func (f *fileTap) Write(p []byte) (int, error) {
	if f.found {
		if f.rest.Len()+len(p) > len(f.marker)+8*(maxRunnerFile+32) {
			return 0, errors.New("the step's file commands are larger than they may be")
		}
		f.rest.Write(p)
		return len(p), nil
	}
	data := append(append([]byte(nil), f.held...), p...)
	f.held = nil
	if i := bytes.Index(data, f.marker); i >= 0 {
		f.found = true
		f.rest.Write(data[i+len(f.marker):])
		return len(p), f.out(data[:i])
	}
	k := 0
	for n := min(len(data), len(f.marker)-1); n > 0; n-- {
		if bytes.HasSuffix(data, f.marker[:n]) {
			k = n
			break
		}
	}
	f.held = append(f.held, data[len(data)-k:]...)
	return len(p), f.out(data[:len(data)-k])
}

func (f *fileTap) out(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := f.w.Write(b)
	return err
}

// flush passes on a held tail when no marker came.
func (f *fileTap) flush() {
	if !f.found {
		_ = f.out(f.held)
		f.held = nil
	}
}

// readFiles writes the file commands that followed the marker (b: a
// newline, then for each of paths its size on a line and its bytes, -1
// for a file the step removed) to the runner's files. The step controls
// these bytes: a size larger than what is left is an error.
func readFiles(work string, paths []string, b []byte) error {
	rest := bytes.TrimPrefix(b, []byte("\n"))
	for _, p := range paths {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return fmt.Errorf("short answer")
		}
		n, err := strconv.Atoi(string(bytes.TrimSpace(line)))
		if err != nil || n < -1 || n > len(after) {
			return fmt.Errorf("bad size %q for %s", bytes.TrimSpace(line), p)
		}
		host, _ := hostPath(work, p)
		content := []byte(nil)
		if n >= 0 {
			content, after = after[:n], after[n:]
		}
		if err := os.WriteFile(host, content, 0o644); err != nil {
			return err
		}
		rest = after
	}
	return nil
}
