// Package stageclient is the in-pod side of `warmpod job stage`, the one
// call an executor makes per stage: it stores the stage's script in the
// job's directory (Store), and it streams the stage's output from the
// job log back to the executor until the stage has ended (Stream),
// resuming at a byte offset after a broken exec stream.
//
// It asks PID 1 about the stage through a Source (the control socket in
// production: ControlSource), so the streaming and resume logic is unit
// tested against a temporary log file and a fake source, without PID 1
// or root. cmd/warmpod wires it to flags, stdin and stdout.
package stageclient
