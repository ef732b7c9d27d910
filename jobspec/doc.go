// Package jobspec parses the job spec that an executor pipes into
// `warmpod job start`, holds the job's secrets (the job token and the CI
// variables), and turns them into the job shell's environment.
//
// # Secret handling
//
// Secrets are kept in [Secret], a wrapper around a []byte owned by this
// package. Every way the standard library has of printing or encoding a
// value (fmt verbs, encoding/json, encoding.TextMarshaler, log/slog) yields
// the string "[redacted]" for a Secret, so a Spec, a Variable or a Secret can
// be handed to a logger without leaking the clear value. The clear value is
// only available through [Secret.Reveal], [Spec.Env], [Spec.WriteFiles] and
// [RenderExports].
//
// Wiping is best effort. [ParseSpec] decodes each JSON string that holds a
// secret straight into a []byte it allocates once at its final size (see
// [Secret.UnmarshalJSON]), so no intermediate Go string or re-grown buffer
// holds the secret, and [Spec.Wipe] zeroes those bytes. What this package
// cannot wipe: the caller's input buffer (the caller should clear it after
// ParseSpec returns), the Go strings returned by [Secret.Reveal], [Spec.Env]
// and shquote.Quote (Go strings are immutable), copies the runtime or the kernel
// made (pipe buffers, the environment of the job's processes), and memory
// the garbage collector moved or freed before the wipe.
//
// # Errors
//
// Every error that [ParseSpec] returns is a *[SpecError]. Error messages name
// the offending field and a fixed reason; they never echo a value, the token
// or any other part of the input.
//
// The package is written for Linux (warmpod runs as PID 1 in a Kubernetes
// pod) and uses Unix-only open flags.
package jobspec
