package control

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The documents that cross the line between an executor (a CI system's
// driver or hook, outside the pod), warmpod's in-pod clients and PID 1.
// They are defined once, here: the executor writes JobSpec and reads
// StageStatus through these types, PID 1 (package supervisor) and the
// `warmpod job stage` client write StageStatus with them. PID 1 reads the
// job spec with package jobspec, whose parser zeroes secrets. The golden
// files in testdata/golden pin the JSON of each (golden_test.go); package
// jobspec's and package executor's tests read them too.
// docs/reference/protocol.md describes them.

// JobSpec is `warmpod job start`'s stdin: one JSON line. The
// token and the variables' values are secrets: an executor writes the
// line to the exec's stdin only, never to argv, a log or a file.
type JobSpec struct {
	// ID names the job: A-Z a-z 0-9 . _ -, at most 256 bytes, not
	// starting with "." and without ".." (jobspec.MaxIDBytes, checkID).
	ID string `json:"id"`
	// Nonce tells a replay of the same start (same id and nonce: an
	// idempotent success) from a second job with the same id.
	Nonce string `json:"nonce"`
	// Token becomes $CI_JOB_TOKEN (PID 1's --token-env) in the job.
	Token string `json:"token,omitempty"`
	// Timeout is the lease's hard limit, a Go duration ("1h10m"); at most
	// 168h.
	Timeout string `json:"timeout"`
	// LeaseTTL is the heartbeat: without a renewal (every call naming
	// the job renews it; job stage and job logs --follow send job.renew
	// while they wait) for this long the job ends.
	LeaseTTL string `json:"lease_ttl,omitempty"`
	// ConfigHash must equal PID 1's --config-hash when that is set (75
	// otherwise: a pod of another configuration).
	ConfigHash string `json:"config_hash,omitempty"`
	// Scope pins a reusable pod (--max-jobs other than 1) to one trust
	// domain.
	Scope string `json:"scope,omitempty"`
	// Variables are the job's environment, in order; keys are POSIX
	// names, unique.
	Variables []JobVariable `json:"variables"`
	// CleanupPaths are absolute directory patterns whose contents PID 1
	// removes when the job ends.
	CleanupPaths []string `json:"cleanup_paths,omitempty"`
}

// JobVariable is one variable of a JobSpec.
type JobVariable struct {
	// Key is the variable's name: a POSIX name ([A-Za-z_][A-Za-z0-9_]*).
	Key string `json:"key"`
	// Value is the variable's value, a secret (NUL bytes refused: sh
	// cannot hold them).
	Value string `json:"value"`
	// Masked asks the executor's log to mask the value (carried only).
	Masked bool `json:"masked,omitempty"`
	// File writes the value to a 0400 file in the job's directory; the
	// variable then holds the file's path.
	File bool `json:"file,omitempty"`
}

// StageStatus is a stage's status document: the JSON line `warmpod job
// stage` writes on stderr when it attaches and again when the stage has
// ended, and the Data of OpJobStage, OpJobWait and OpJobStatus (with
// Stage set) answers.
type StageStatus struct {
	// Stage is the stage's name.
	Stage string `json:"stage"`
	// PID is the stage leader's PID in the container.
	PID int `json:"pid,omitempty"`
	// Running is true until the stage leader has been reaped.
	Running bool `json:"running"`
	// ExitCode is the leader's exit status (128+N when it died of signal
	// N); nil while it runs.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that killed the leader ("SIGKILL").
	Signal string `json:"signal,omitempty"`
	// OOMKilled: the leader died of SIGKILL while the container cgroup's
	// oom_kill counter went up.
	OOMKilled bool `json:"oom_killed"`
	// Started and Ended are the stage's start and end (Ended nil while it
	// runs).
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// LogStart and LogEnd are byte offsets in the job log: the stage's
	// output is [LogStart, LogEnd); LogEnd is absent while it runs.
	LogStart int64  `json:"log_start"`
	LogEnd   *int64 `json:"log_end,omitempty"`
	// SHA256 is the hex digest of the stage's script, when it was given
	// one (a retry with the same digest attaches instead of running it
	// again).
	SHA256 string `json:"sha256,omitempty"`
	// Replay is true when this answer attached to a stage that an earlier
	// request with the same script digest had started.
	Replay bool `json:"replay,omitempty"`
}

// JobStatus is the job's status document: the Data of an OpJobStatus
// answer without Stage. An executor reads Stages to learn which stages
// exist (a retried `job stage` looks for its own name and digest).
type JobStatus struct {
	// Job is the job's ID.
	Job string `json:"job"`
	// Cancelled is true once job.cancel was asked for the whole job.
	Cancelled bool `json:"cancelled"`
	// Log is the job log's path in the pod.
	Log string `json:"log"`
	// Stages are the job's stages in the order they were started; never
	// null.
	Stages []StageStatus `json:"stages"`
}

// MaxStageName is the longest stage name, in bytes.
const MaxStageName = 128

// ValidStageName reports whether name is a stage name: 1–MaxStageName
// bytes of [A-Za-z0-9._-], starting with a letter or digit. PID 1 refuses
// any other name (65) because a stage name becomes a file name in the
// job's directory and a marker line in the job log; `warmpod job stage`
// checks it before it writes the script. Written out rather than as a
// regexp, which would add about 160 KB to PID 1 for one check.
func ValidStageName(name string) bool {
	if len(name) == 0 || len(name) > MaxStageName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ParseUser parses a job user as "UID" or "UID:GID" (numeric only: PID 1
// has no user database to look names up in, and a scratch image has no
// /etc/passwd). An empty v is no job user (nil). It is both PID 1's
// --job-user and Response.User, which in-pod clients use to give the
// files they write to the job user.
func ParseUser(v string) (*syscall.Credential, error) {
	if v == "" {
		return nil, nil
	}
	us, gs, hasG := strings.Cut(v, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%q: want numeric UID[:GID]", v)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseUint(gs, 10, 32); err != nil {
			return nil, fmt.Errorf("%q: want numeric UID[:GID]", v)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
