package procscan_test

import (
	"testing"

	"github.com/warmpod/warmpod/procscan"
)

// benchProcs is a synthetic process table of a busy CI container: PID 1,
// its shell, and a build tree of n processes (each parent has up to 4
// children), a tenth of them zombies.
func benchProcs(n int) []procscan.Proc {
	procs := []procscan.Proc{{PID: 1, PPID: 0, PGID: 1, SID: 1, State: 'S', Comm: "warmpod"}, {PID: 2, PPID: 1, PGID: 2, SID: 1, State: 'S', Comm: "sh"}}
	for i := 0; i < n; i++ {
		pid := 3 + i
		ppid := 2 + i/4
		st := byte('S')
		if i%10 == 9 {
			st = 'Z'
		}
		procs = append(procs, procscan.Proc{PID: pid, PPID: ppid, PGID: 2, SID: 1, State: st, Comm: "make"})
	}
	return procs
}

func BenchmarkForeign1000(b *testing.B) {
	procs := benchProcs(1000)
	skip := func(p procscan.Proc) bool { return p.PID == 1 || p.PID == 2 }
	b.ReportAllocs()
	for b.Loop() {
		if got := procscan.Foreign(procs, skip); len(got) == 0 {
			b.Fatal("no foreign processes")
		}
	}
}

func BenchmarkDescendants1000(b *testing.B) {
	procs := benchProcs(1000)
	b.ReportAllocs()
	for b.Loop() {
		if got := procscan.Descendants(procs, 2); len(got) != 1000 {
			b.Fatalf("got %d descendants", len(got))
		}
	}
}
