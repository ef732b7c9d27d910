// Package joblog serves a CI job's log file to an executor over streams that
// may break at any moment.
//
// # Reading a log: records and offsets
//
// Each stage of a job runs detached inside the pod; the kernel appends its
// stdout and stderr (an O_APPEND descriptor) to one log file per job. The
// executor reads that file back over `kubectl exec`, and when the stream
// breaks it starts a new reader at the last byte offset it saw. [Read]
// implements the reader side and follows the protocol of
// `gitlab-runner-helper read-logs` (commands/helpers/read_logs.go in
// gitlab-runner, whose Kubernetes executor parses these records):
//
//   - every output record is "<offset> <line>\n", where <offset> is the
//     decimal file position just after the bytes that record consumed;
//   - a line longer than the maximum line length is split, and each piece
//     gets a '\n' added so that records stay one per output line;
//   - the reader waits (polling) for the file to appear, polls at EOF in
//     follow mode, and reports a deleted file distinctly (the CLI exits 100,
//     read-logs' outputLogFileNotExistsExitCode).
//
// # Reassembling the file from records
//
// A record's line never contains '\n'. The record's offset tells how many
// file bytes it consumed: with prev the offset the read started at (or the
// previous record's offset), the record consumed n = offset - prev bytes,
// and either
//
//   - n == len(line)+1: the file held line followed by '\n'; or
//   - n == len(line): the file held line with no '\n' after it (a piece of
//     a split long line, or a partial last line printed at EOF); the '\n'
//     that ends the record was added by the reader.
//
// Any other n means the stream is corrupt. Appending, for every record,
// exactly n file bytes (line, plus '\n' in the first case) rebuilds the
// file from the start offset byte for byte; resuming at any record's offset
// continues exactly where that record ended. [ParseRecord] splits a record.
//
// The package is written for Linux (warmpod runs as PID 1 in a Kubernetes
// pod); it uses only portable os calls plus inode/device identity.
package joblog
