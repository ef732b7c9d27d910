package github

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// posixName is the rule warmpod's job start applies to variable names.
var posixName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// prepareJob gets a pod for the job container and hands the job to it:
// a warm pod of the pool whose image and services are the job's, else a
// cold pod from that image's pool template (or the default pool's, with
// the job's image) with the job's services as sidecars. The container's
// environment goes to the pod on job start's stdin. Then the runner's
// _work goes into the pod once, verified (sendWork). The answer carries
// isAlpine, the job and service containers of the job context, and the
// state every later command gets.
func (h *Hook) prepareJob(ctx context.Context, args PrepareJobArgs, cancel <-chan struct{}) (*Response, error) {
	if args.Container == nil {
		return nil, fmt.Errorf("%w: the job has no container: warmpod-github runs jobs in a job container (set `container:`; ARC's ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true refuses the others)", ErrInput)
	}
	c := args.Container
	if c.Image == "" || (c.Dockerfile != nil && *c.Dockerfile != "") {
		return nil, fmt.Errorf("%w: the job container needs an image (a Dockerfile cannot be built in Kubernetes mode)", ErrInput)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-cancel:
			stop()
		case <-ctx.Done():
		}
	}()
	set, err := h.pools(ctx)
	if err != nil {
		return nil, err
	}
	p, warm, err := pickPool(set, c.Image, args.Services)
	if err != nil {
		return nil, err
	}
	if _, dropped := serviceHostnames(args.Services); len(dropped) > 0 {
		fmt.Fprintf(h.Stderr, "::warning::warmpod: service names %q are not DNS names: the job's steps cannot reach the services by them\n", dropped)
	}
	if warm && p.Stale() {
		fmt.Fprintf(h.Stderr, "::warning::warmpod: %s=%q in the pool manifest, but its template hashes to %q: pods made from it are never claimed warm; put the hash in the manifest (warmpod-gitlab --pools FILE pool-hash) and apply it, or let the hook read the pools from the cluster (no --pools; WARMPOD_CONFIG_HASH from pod-template-hash, deploy/github-pool.yaml)\n", poolapi.LabelConfig, p.FileHash, p.Hash)
	}
	if _, own := set.ForImage(c.Image); own && !warm {
		fmt.Fprintf(debugWriter{h.Stdout}, "warmpod: the pool of image %s runs other services than the job's: a cold pod with the job's services\n", c.Image)
	}
	st := &State{Job: newJobID(), Runner: h.runner(), Server: h.server()}
	owner := poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner}
	job := executor.Job{ID: st.Job, Timeout: h.Cfg.Timeout, Variables: h.variables(actionsEnv(c.EnvironmentVariables)), Owner: owner}
	early := h.Mux.Early(muxKey(st))
	defer early.Close()
	core := h.core(nil)
	core.Attach = early.Attacher(h.Cluster, st.Job, core.Log, warningWriter{h.Stderr})
	pod, err := core.Acquire(ctx, p, warm, job)
	if err != nil {
		return nil, err
	}
	st.Pod = pod
	kind := "cold"
	if pod.Warm {
		kind = "warm"
	}
	fmt.Fprintf(core.Log, "warmpod: job %s runs on %s pod %s (pool %s)\n", st.Job, kind, pod.Name, pod.Pool)
	// _work goes in by exec of a shell of its own (the stream carries only
	// warmpod's job commands); the multiplexer attaches meanwhile.
	probed, err := h.sendWork(ctx, core, st)
	if err != nil {
		core.End(context.WithoutCancel(ctx), &pod, st.Job, owner)
		h.Mux.Stop(muxKey(st), st.Job, st.Pod, core.Log)
		return nil, err
	}
	alpine := probed
	// The annotation speaks for the pool's own image only, not for a cold
	// pod of another image made from its template.
	if _, own := set.ForImage(c.Image); own {
		if v, ok := p.Template.Annotations[poolapi.AnnotationAlpine]; ok {
			alpine = v == "true"
		}
	}
	resp := &Response{State: st, IsAlpine: &alpine}
	resp.Context = &struct {
		Container *ResponseContainer  `json:"container,omitempty"`
		Services  []ResponseContainer `json:"services,omitempty"`
	}{Container: &ResponseContainer{ID: pod.Name, Ports: ports(c.PortMappings)}}
	for _, s := range args.Services {
		// Matched by index to the job's services; they share the pod's
		// network (localhost), so the pod names them all.
		resp.Context.Services = append(resp.Context.Services, ResponseContainer{ID: pod.Name, Ports: ports(s.PortMappings)})
	}
	return resp, nil
}

// actionsEnv is env, a container's environment from the runner, with the
// two variables GitHub documents as always set in a job: GITHUB_ACTIONS
// ("true", whatever the workflow said) and CI ("true" unless the
// workflow set CI itself). The runner does not put them in the hook's
// input: its Docker path adds them when it creates a container
// (DockerCommandManager), the upstream k8s hook in prepare_job
// (createContainerSpec) and run_container_step, for the job container and
// every service. A fresh map: env is the input's.
func actionsEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+2)
	maps.Copy(out, env)
	out["GITHUB_ACTIONS"] = "true"
	if _, ok := env["CI"]; !ok {
		out["CI"] = "true"
	}
	return out
}

// variables turns a container's environment into job variables, sorted by
// name; a name warmpod cannot export (not a POSIX name) is left out with a
// warning, since job start would refuse the whole job for it.
func (h *Hook) variables(env map[string]string) []control.JobVariable {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]control.JobVariable, 0, len(keys))
	for _, k := range keys {
		if !posixName.MatchString(k) {
			fmt.Fprintf(h.Stderr, "::warning::warmpod: the container's environment variable %q is not a POSIX name: left out\n", k)
			continue
		}
		out = append(out, control.JobVariable{Key: k, Value: env[k]})
	}
	return out
}

// pickPool chooses the pool for a job container of image with services
// ([pool.Set.Choose]): a service is served by a pool's container of its
// image, and reached by its names (serviceHostnames). Errors: a service
// without an image.
func pickPool(set *pool.Set, image string, services []Container) (pool.Pool, bool, error) {
	names, _ := serviceHostnames(services)
	sidecars := make([]pool.Sidecar, len(services))
	for i, s := range services {
		if s.Image == "" {
			return pool.Pool{}, false, fmt.Errorf("%w: a service without an image", ErrInput)
		}
		sidecars[i] = pool.Sidecar{Container: sidecar(i, s)}
	}
	if len(sidecars) > 0 {
		// The upstream hook's names reach every service of the pod: they
		// go with the first, as one hostAliases entry.
		sidecars[0].Hostnames = names
	}
	p, warm := set.Choose(image, sidecars)
	return p, warm, nil
}

// sidecar is the container of service i: its image, environment, ports,
// and entry point and arguments when the service sets them.
func sidecar(i int, s Container) corev1.Container {
	c := corev1.Container{Name: "svc-" + strconv.Itoa(i), Image: s.Image}
	if s.EntryPoint != nil && *s.EntryPoint != "" {
		c.Command = []string{*s.EntryPoint}
	}
	if len(s.EntryPointArgs) > 0 {
		c.Args = s.EntryPointArgs
	}
	env := actionsEnv(s.EnvironmentVariables)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	for _, pm := range s.PortMappings {
		if n, err := strconv.Atoi(containerPort(pm)); err == nil && n > 0 && n < 65536 {
			c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(n)})
		}
	}
	return c
}

// containerPort is the container side of a port mapping ("8080",
// "80:8080", "127.0.0.1:80:8080/tcp" → "8080").
func containerPort(pm string) string {
	pm, _, _ = strings.Cut(pm, "/")
	if i := strings.LastIndexByte(pm, ':'); i >= 0 {
		return pm[i+1:]
	}
	return pm
}

// ports is a job context's ports map: container port → the port it is
// reached on. Pods share the node's or their own network namespace, so a
// container port is reached as itself.
func ports(mappings []string) map[string]string {
	if len(mappings) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, pm := range mappings {
		p := containerPort(pm)
		out[p] = p
	}
	return out
}

// cleanupJob ends the job in its pod (`warmpod job end`) and deletes the
// pod, then every other pod labelled for this runner (an earlier job's it
// lost track of, a prepare_job cancelled before it answered).
func (h *Hook) cleanupJob(ctx context.Context, st *State) error {
	core := h.core(st)
	if st != nil {
		core.End(ctx, &st.Pod, st.Job, poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner})
		h.Mux.Stop(muxKey(st), st.Job, st.Pod, core.Log)
	}
	core.End(ctx, nil, "", poolapi.Owner{Runner: h.runner()})
	return nil
}

// runContainerStep runs a container action's image: a cold pod of it (or
// a warm one of a pool of that image), the runner's _work brought in, the
// entry point with its arguments run as one stage, the pod deleted after.
// A Dockerfile action is refused: nothing can build an image here.
func (h *Hook) runContainerStep(ctx context.Context, job *State, c Container, cancel <-chan struct{}) error {
	if c.Dockerfile != nil && *c.Dockerfile != "" {
		return fmt.Errorf("%w: Dockerfile actions are not supported in Kubernetes mode (nothing builds images here): publish the image and use `uses: docker://IMAGE`", ErrInput)
	}
	if c.Image == "" {
		return fmt.Errorf("%w: run_container_step without an image", ErrInput)
	}
	set, err := h.pools(ctx)
	if err != nil {
		return err
	}
	p, warm, err := pickPool(set, c.Image, nil)
	if err != nil {
		return err
	}
	st := &State{Job: newJobID(), Runner: h.runner(), Server: h.server()}
	owner := poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner}
	core := h.core(job)
	if job != nil {
		// No stage runs in the job's own pod meanwhile: keep its lease.
		defer core.KeepAlive(ctx, job.Pod, job.Job)()
	}
	pod, err := core.Acquire(ctx, p, warm, executor.Job{ID: st.Job, Timeout: h.Cfg.Timeout, Variables: h.variables(actionsEnv(c.EnvironmentVariables)), Owner: owner})
	if err != nil {
		return err
	}
	st.Pod = pod
	defer core.End(context.WithoutCancel(ctx), &pod, st.Job, owner)
	if _, err := h.sendWork(ctx, core, st); err != nil {
		return err
	}
	var argv []string
	if c.EntryPoint != nil && *c.EntryPoint != "" {
		argv = append(argv, *c.EntryPoint)
	}
	argv = append(argv, c.EntryPointArgs...)
	if len(argv) == 0 {
		return fmt.Errorf("%w: the action's container has no entry point (the image's own ENTRYPOINT cannot be read from here): set runs.entrypoint", ErrInput)
	}
	wd := ""
	if c.WorkingDirectory != nil {
		wd = *c.WorkingDirectory
	}
	var script bytes.Buffer
	writeStepScript(&script, nil, nil, nil, wd, argv, nil, "")
	final, err := core.RunStage(ctx, pod, st.Job, stageName(), script.Bytes(), h.Stdout, debugWriter{h.Stdout}, cancel)
	if err != nil {
		return err
	}
	if code := *final.ExitCode; code != 0 {
		return &StepError{Code: code}
	}
	return nil
}
