module github.com/warmpod/warmpod/bench

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/warmpod/warmpod v0.0.0
	golang.org/x/sys v0.50.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

// The benchmarks measure this checkout's warmpod and share its container
// harness (internal/runc).
replace github.com/warmpod/warmpod => ../
