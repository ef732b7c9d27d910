package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// benchSize: metric 1, binary size and linkage (`file`).
func benchSize(c *cfg, res *Results) {
	row := newRow("binary_size", "inits", "binary size", "bytes", true, "1")
	row.Cells = map[string]string{}
	static := map[string]bool{}
	for _, in := range c.inits {
		st, err := os.Stat(in.path)
		if err != nil {
			res.errorf("size", "%s: %v", in.name, err)
			continue
		}
		f := cmdOut("file", "-b", "-L", in.path)
		isStatic := strings.Contains(f, "statically linked") || strings.Contains(f, "static-pie linked")
		stripped := strings.Contains(f, ", stripped")
		static[in.name] = isStatic
		row.set(in.name, float64(st.Size()))
		kind := "dynamic"
		if isStatic {
			kind = "static"
		}
		if stripped {
			kind += ", stripped"
		}
		row.Cells[in.name] = fmt.Sprintf("%s (%s)", commas(st.Size()), kind)
	}
	// The fair comparison is with static anchors: Debian's tini and
	// dumb-init are dynamic; tini-static is the static build of tini.
	ref := 0.0
	refName := ""
	for _, cand := range []struct{ name, path string }{{"tini-static", "/usr/bin/tini-static"}, {"catatonit", c.catatonit}} {
		if st, err := os.Stat(cand.path); err == nil && (ref == 0 || float64(st.Size()) < ref) {
			ref, refName = float64(st.Size()), cand.name
		}
	}
	if ts, err := os.Stat("/usr/bin/tini-static"); err == nil {
		row.Raw["tini-static"] = []float64{float64(ts.Size())}
	}
	if w, ok := row.Values["warmpod"]; ok && ref > 0 {
		q := w / ref
		row.Ratio, row.RatioOf = &q, "warmpod / "+refName+" (smallest static anchor)"
		row.Target = "≤ 5 MiB (5,242,880 B), static"
		row.check(w <= 5<<20 && static["warmpod"])
	}
	row.Note = "`stat` size of the binary each other metric runs (Debian packages: tini and dumb-init are dynamic builds; `/usr/bin/tini-static` is " +
		commas(int64(firstOr(row.Raw["tini-static"]))) + " B); linkage from `file -L`. warmpod is `make build` (CGO_ENABLED=0, -trimpath, -ldflags '-s -w')."
	res.add(row)
	sizeProfile(c, res)
}

func firstOr(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[0]
}

// sizeProfile attributes the unstripped binary's symbol sizes to packages
// (go tool nm -size): where the bytes come from.
func sizeProfile(c *cfg, res *Results) {
	root := c.root
	bin := filepath.Join(c.work, "warmpod.unstripped")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/warmpod")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		res.errorf("size", "unstripped build for the size profile: %v: %s", err, out)
		return
	}
	// Symbols of the sections that are in the file (text, rodata, data;
	// not bss/noptrbss, which only take address space), by package.
	f, err := elf.Open(bin)
	if err != nil {
		res.errorf("size", "elf: %v", err)
		return
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		res.errorf("size", "elf symbols: %v", err)
		return
	}
	byPkg := map[string]int64{}
	var total int64
	for _, sym := range syms {
		if sym.Size == 0 || int(sym.Section) <= 0 || int(sym.Section) >= len(f.Sections) {
			continue
		}
		if f.Sections[sym.Section].Type == elf.SHT_NOBITS {
			continue
		}
		byPkg[symPkg(sym.Name)] += int64(sym.Size)
		total += int64(sym.Size)
	}
	if st, err := os.Stat(bin); err == nil {
		res.raw("size_unstripped_bytes", st.Size())
	}
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range byPkg {
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v })
	var top []string
	raw := map[string]float64{}
	for i, e := range kvs {
		if i < 14 {
			top = append(top, fmt.Sprintf("%s %s KB", e.k, commas(e.v/1000)))
		}
		raw[e.k] = float64(e.v)
	}
	res.raw("size_by_package_bytes", raw)
	if c.sizeTable != "" {
		var tb strings.Builder
		fmt.Fprintf(&tb, "# warmpod: bytes of text, rodata and data symbols by package (unstripped build, %s B of symbols)\n", commas(total))
		for _, e := range kvs {
			fmt.Fprintf(&tb, "%12s %5.1f%%  %s\n", commas(e.v), 100*float64(e.v)/float64(total), e.k)
		}
		if err := os.WriteFile(c.sizeTable, []byte(tb.String()), 0o644); err != nil {
			res.errorf("size", "%v", err)
		}
	}
	var group = func(prefixes ...string) int64 {
		var s int64
		for k, v := range byPkg {
			for _, p := range prefixes {
				if k == p || strings.HasPrefix(k, p+"/") || strings.HasPrefix(k, p+".") {
					s += v
					break
				}
			}
		}
		return s
	}
	httpish := group("net/http", "vendor/golang.org/x/net", "vendor/golang.org/x/text", "crypto", "vendor/golang.org/x/crypto", "net", "mime", "compress", "math/big", "encoding/asn1", "encoding/pem", "container/list")
	res.note("Binary size profile (ELF symbols of the unstripped build by package, %s KB of text, rodata and data symbols; the rest of the file is mostly pclntab, which grows with the code): largest packages: %s. "+
		"net/http with what only it pulls in (crypto/tls, crypto/x509, x/net/http2, x/text, net, mime, compress, math/big) accounts for about %s KB of the symbols; go-hclog+fatih/color for %s KB; runtime %s KB. (For scale: a stripped Go init without net/http is ~1.7 MB, the same with a net/http health handler ~5.9 MB; research/pid1-anchors.md §4.1.)",
		commas(total/1000), strings.Join(top, ", "), commas(httpish/1000), commas(group("github.com/hashicorp/go-hclog", "github.com/fatih/color", "github.com/mattn/go-colorable", "github.com/mattn/go-isatty")/1000), commas(group("runtime")/1000))
}

// symPkg is the package of a Go symbol name ("net/http.(*Server).Serve" →
// "net/http"; "type:*net/http.Server" → "net/http"; "go:..." → "go:").
func symPkg(name string) string {
	name = strings.TrimPrefix(name, "type:")
	name = strings.TrimLeft(name, "*")
	if strings.HasPrefix(name, "go:") {
		return "go: (itabs, strings, func tables)"
	}
	slash := strings.LastIndexByte(name, '/')
	rest := name[slash+1:]
	dot := strings.IndexByte(rest, '.')
	if dot < 0 {
		return name
	}
	return name[:slash+1+dot]
}
