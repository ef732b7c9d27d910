// Package github is the GitHub Actions runner's container hook on warm
// pods (ACTIONS_RUNNER_CONTAINER_HOOKS, Kubernetes mode of
// actions-runner-controller): the four commands the runner calls
// (prepare_job, run_script_step, run_container_step, cleanup_job) as one
// [Hook] over the CI-neutral executor core (package executor).
//
// The contract with the runner, as actions/runner's ContainerHookManager
// implements it (src/Runner.Worker/Container/ContainerHooks) and as
// ../shared/actions-hooks/hookrun emulates it:
//   - the runner starts the hook anew for every command, `bash -e HOOK.sh`
//     for a .sh hook (so the hook is a shim that execs the binary, which
//     then gets the runner's stdin and signals), its cwd the workspace, its
//     environment the runner's plus GITHUB_* and RUNNER_* (host paths);
//   - stdin is one JSON line (Input), then closed;
//   - the hook answers in Input.ResponseFile, one JSON object (Response),
//     read after an exit 0; a non-null state replaces the stored state and
//     is sent to every later command; prepare_job with a job container must
//     answer isAlpine;
//   - stdout and stderr go through the runner's output manager (workflow
//     commands, secret masking): the hook's own notes are ::debug:: lines;
//   - run_script_step's exit status is the step's;
//   - on cancel the runner sends SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s
//     after that, to the hook's process only.
package github

import "encoding/json"

// The hook commands (Input.Command).
const (
	CmdPrepareJob       = "prepare_job"
	CmdRunScriptStep    = "run_script_step"
	CmdRunContainerStep = "run_container_step"
	CmdCleanupJob       = "cleanup_job"
)

// Input is the hook's stdin (HookInput.cs; camelCase, nulls written).
type Input struct {
	Command      string          `json:"command"`
	ResponseFile string          `json:"responseFile"`
	Args         json.RawMessage `json:"args"`
	// State is what an earlier command answered (null for prepare_job).
	State json.RawMessage `json:"state"`
}

// Mount is a volume the runner asks for (HookInput.cs MountVolume).
type Mount struct {
	SourceVolumePath string `json:"sourceVolumePath"`
	TargetVolumePath string `json:"targetVolumePath"`
	ReadOnly         bool   `json:"readOnly"`
}

// Container is a job, service or action container (HookContainer).
type Container struct {
	Image                string            `json:"image"`
	Dockerfile           *string           `json:"dockerfile"`
	EntryPoint           *string           `json:"entryPoint"`
	EntryPointArgs       []string          `json:"entryPointArgs"`
	WorkingDirectory     *string           `json:"workingDirectory"`
	CreateOptions        *string           `json:"createOptions"`
	EnvironmentVariables map[string]string `json:"environmentVariables"`
	PortMappings         []string          `json:"portMappings"`
	SystemMountVolumes   []Mount           `json:"systemMountVolumes"`
	UserMountVolumes     []Mount           `json:"userMountVolumes"`
	// ContextName is a service's label (`services: LABEL:`), which
	// hooklib's ServiceContainerInfo declares but actions/runner does not
	// send (HookInput.cs has no such field; actions/runner#2783): empty
	// from today's runner. When set, the service is reachable by it.
	ContextName string `json:"contextName,omitempty"`
}

// PrepareJobArgs are prepare_job's args.
type PrepareJobArgs struct {
	Container *Container  `json:"container"`
	Services  []Container `json:"services"`
}

// ScriptStepArgs are run_script_step's args: a `run:` step (entry point
// sh or bash, -e /__w/_temp/GUID.sh) or a JavaScript action (entry point
// /__e/node20/bin/node). Paths are container paths; EnvironmentVariables
// hold the step's secrets.
type ScriptStepArgs struct {
	EntryPoint           string            `json:"entryPoint"`
	EntryPointArgs       []string          `json:"entryPointArgs"`
	EnvironmentVariables map[string]string `json:"environmentVariables"`
	PrependPath          []string          `json:"prependPath"`
	WorkingDirectory     string            `json:"workingDirectory"`
}

// ResponseContainer is a container of the job context (job.container,
// job.services.<name>).
type ResponseContainer struct {
	ID      string            `json:"id,omitempty"`
	Network string            `json:"network,omitempty"`
	Ports   map[string]string `json:"ports,omitempty"`
}

// Response is what a command writes to Input.ResponseFile.
type Response struct {
	State    *State `json:"state,omitempty"`
	IsAlpine *bool  `json:"isAlpine,omitempty"`
	Context  *struct {
		Container *ResponseContainer  `json:"container,omitempty"`
		Services  []ResponseContainer `json:"services,omitempty"`
	} `json:"context,omitempty"`
}
