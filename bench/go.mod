module github.com/warmpod/warmpod/bench

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/warmpod/warmpod v0.0.0
	golang.org/x/sys v0.50.0
)

// The benchmarks measure this checkout's warmpod and share its container
// harness (internal/runc).
replace github.com/warmpod/warmpod => ../
