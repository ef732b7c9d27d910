// Package oneproc sets GOMAXPROCS to 1 while the program initialises,
// unless the environment sets GOMAXPROCS. It exists so PID 1 runs with
// one P from as early as a Go program can ask for it: packages are
// initialised dependencies first, then in import-path order, and this
// one needs only os and runtime. Set later, in main, the package
// initialisers would already have allocated from every P's cache, and
// those spans stay: measured on a 2-CPU machine, idle RssAnon was
// 1,304–1,496 KiB when main set it against 1,064–1,100 KiB with
// GOMAXPROCS=1 in the environment.
//
// Import it for its side effect, from PID 1's main package only.
package oneproc

import (
	"os"
	"runtime"
	"strconv"
)

// init leaves a valid GOMAXPROCS (a positive integer, as the runtime
// reads it) alone; an unset or invalid one, which the runtime ignores,
// becomes 1.
func init() {
	if n, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err != nil || n < 1 {
		runtime.GOMAXPROCS(1)
	}
}
