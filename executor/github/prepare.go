//go:build !percall

package github

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/executor"
	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// KubePods carries out the hook's commands that claim or create pods
// (prepare_job, run_container_step) on client-go: Hook.Pods of the full
// warmpod-github.
type KubePods struct {
	// Cluster claims, creates and reaches pods; nil: Connect makes it.
	Cluster executor.Cluster
	// Connect makes Cluster, once the input has been read and checked.
	Connect func() (executor.Cluster, error)
	// Pools is the pool manifest of --pools; nil: the pools are read from
	// the cluster (Cluster.Pools), once per command, as warmpod-gitlab
	// does. A job container's image picks its pool.
	Pools *pool.Set
}

// connect sets up Cluster (once).
func (k *KubePods) connect(h *Hook) error {
	if k.Cluster != nil || k.Connect == nil {
		return nil
	}
	t0 := time.Now()
	cl, err := k.Connect()
	h.trace.client(time.Since(t0))
	if err != nil {
		return err
	}
	k.Cluster = cl
	return nil
}

// core is the CI-neutral executor for this command: its claims are
// Cluster's; with the job's state its execs into the job's pod go
// through the job's multiplexer when it answers.
func (k *KubePods) core(h *Hook, st *State) *executor.Core {
	return &executor.Core{Session: *h.session(k.Cluster, st), Claims: k.Cluster, WarmWait: h.Cfg.WarmWait, ReadyTimeout: h.Cfg.ReadyTimeout,
		ResizeTimeout: h.Cfg.ResizeTimeout, RBAC: "deploy/github-rbac.yaml",
		NodesRBAC: "the hook's account needs get and list on nodes, the ClusterRole warmpod-github-nodes of deploy/github-rbac.yaml bound to it in its namespace (the chart's github.nodeReader makes one)",
		Warn:      func(msg string) { fmt.Fprintf(warningWriter{h.Stderr}, "warmpod: %s\n", msg) }}
}

// prepareJob gets a pod for the job container and hands the job to it:
// a warm pod of the pool whose image and services are the job's, else a
// cold pod from that image's pool template (or the default pool's, with
// the job's image) with the job's services as sidecars. The container's
// environment goes to the pod on job start's stdin. Then the runner's
// _work goes into the pod once, verified (sendWork). The answer carries
// isAlpine, the job and service containers of the job context, and the
// state every later command gets.
// PrepareJob is prepare_job ([Pods]).
func (k *KubePods) PrepareJob(ctx context.Context, h *Hook, args PrepareJobArgs, cancel <-chan struct{}) (*Response, error) {
	if args.Container == nil {
		return nil, fmt.Errorf("%w: the job has no container: warmpod-github runs jobs in a job container (set `container:`; ARC's ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER=true refuses the others)", ErrInput)
	}
	c := args.Container
	if c.Image == "" || (c.Dockerfile != nil && *c.Dockerfile != "") {
		return nil, fmt.Errorf("%w: the job container needs an image (a Dockerfile cannot be built in Kubernetes mode)", ErrInput)
	}
	sidecars, err := pickSidecars(args.Services)
	if err != nil {
		return nil, err
	}
	if _, dropped := serviceHostnames(args.Services); len(dropped) > 0 {
		fmt.Fprintf(h.Stderr, "::warning::warmpod: service names %q are not DNS names: the job's steps cannot reach the services by them\n", dropped)
	}
	res, caps, err := h.resources(*c)
	if err != nil {
		return nil, err
	}
	if err := k.connect(h); err != nil {
		return nil, err
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
	st := &State{Job: newJobID(), Runner: h.runner(), Server: h.server()}
	owner := poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner}
	job := executor.Job{ID: st.Job, Timeout: h.Cfg.Timeout, Variables: h.variables(actionsEnv(c.EnvironmentVariables)), Owner: owner}
	early := h.Mux.Early(muxKey(st))
	defer early.Close()
	core := k.core(h, nil)
	core.Attach = early.Attacher(k.Cluster, st.Job, core.Log, warningWriter{h.Stderr})
	prep, err := core.Prepare(ctx, executor.Request{Pools: k.Pools, Image: c.Image, Sidecars: sidecars, Resources: res, Caps: caps, Job: job})
	if err != nil {
		return nil, err
	}
	pod, p := prep.Pod, prep.Pool
	st.Pod = pod
	// _work goes in by execs of their own, and its last piece with the
	// unpack over the job's stream (sendWork).
	probed, err := h.sendWork(ctx, core.Log, h.Mux.Wrap(k.Cluster, muxKey(st), st.Job, st.Pod, core.Log), st)
	if err != nil {
		core.End(context.WithoutCancel(ctx), &pod, st.Job, owner)
		h.Mux.Stop(muxKey(st), st.Job, st.Pod, core.Log)
		return nil, err
	}
	alpine := probed
	// The annotation speaks for the pool's own image only, not for a cold
	// pod of another image made from its template.
	if _, own := prep.Pools.ForImage(c.Image); own {
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

// pickSidecars are services as the pool containers that would serve
// them ([pool.Set.Choose]): a service is served by a pool's container of
// its image, and reached by its names (serviceHostnames). Errors: a
// service without an image.
func pickSidecars(services []Container) ([]pool.Sidecar, error) {
	names, _ := serviceHostnames(services)
	sidecars := make([]pool.Sidecar, len(services))
	for i, s := range services {
		if s.Image == "" {
			return nil, fmt.Errorf("%w: a service without an image", ErrInput)
		}
		sidecars[i] = pool.Sidecar{Container: sidecar(i, s)}
	}
	if len(sidecars) > 0 {
		// The upstream hook's names reach every service of the pod: they
		// go with the first, as one hostAliases entry.
		sidecars[0].Hostnames = names
	}
	return sidecars, nil
}

// resources are the resources container c asks for (jobResources: the
// pod template extension's and container.options'); each part of either
// that warmpod leaves out is a ::warning:: line.
func (h *Hook) resources(c Container) (*corev1.ResourceRequirements, corev1.ResourceList, error) {
	res, caps, notes, err := jobResources(h.Env, c.CreateOptions)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range notes {
		fmt.Fprintf(warningWriter{h.Stderr}, "warmpod: %s\n", n)
	}
	return res, caps, nil
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

// runContainerStep runs a container action's image: a cold pod of it (or
// a warm one of a pool of that image), the runner's _work brought in, the
// entry point with its arguments run as one stage, the pod deleted after.
// A Dockerfile action is refused: nothing can build an image here.
// RunContainerStep is run_container_step ([Pods]).
func (k *KubePods) RunContainerStep(ctx context.Context, h *Hook, job *State, c Container, cancel <-chan struct{}) error {
	if c.Dockerfile != nil && *c.Dockerfile != "" {
		return fmt.Errorf("%w: Dockerfile actions are not supported in Kubernetes mode (nothing builds images here): publish the image and use `uses: docker://IMAGE`", ErrInput)
	}
	if c.Image == "" {
		return fmt.Errorf("%w: run_container_step without an image", ErrInput)
	}
	res, caps, err := h.resources(c)
	if err != nil {
		return err
	}
	if err := k.connect(h); err != nil {
		return err
	}
	st := &State{Job: newJobID(), Runner: h.runner(), Server: h.server()}
	owner := poolapi.Owner{Job: st.Job, Server: st.Server, Runner: st.Runner}
	core := k.core(h, job)
	if job != nil {
		// No stage runs in the job's own pod meanwhile: keep its lease.
		defer core.KeepAlive(ctx, job.Pod, job.Job)()
	}
	prep, err := core.Prepare(ctx, executor.Request{Pools: k.Pools, Image: c.Image, Resources: res, Caps: caps,
		Job: executor.Job{ID: st.Job, Timeout: h.Cfg.Timeout, Variables: h.variables(actionsEnv(c.EnvironmentVariables)), Owner: owner}})
	if err != nil {
		return err
	}
	pod := prep.Pod
	st.Pod = pod
	defer core.End(context.WithoutCancel(ctx), &pod, st.Job, owner)
	if _, err := h.sendWork(ctx, core.Log, k.Cluster, st); err != nil {
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
