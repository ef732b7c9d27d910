package jobspec_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/warmpod/warmpod/jobspec"
)

// benchSpec is a job spec with n variables as an executor sends it: mixed
// masked, file and plain variables with values of a few dozen bytes, some
// holding quotes and newlines (escaped in JSON).
func benchSpec(n int) []byte {
	type v struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Masked bool   `json:"masked,omitempty"`
		File   bool   `json:"file,omitempty"`
	}
	vars := make([]v, n)
	for i := range vars {
		vars[i] = v{
			Key:    fmt.Sprintf("CI_VAR_%03d", i),
			Value:  fmt.Sprintf("value-%d it's \"quoted\"\nsecond line with some padding %040d", i, i),
			Masked: i%3 == 0,
			File:   i%10 == 0,
		}
	}
	b, err := json.Marshal(map[string]any{
		"id": "1234567", "nonce": "n-1", "token": "glcbt-64_abcdefghijklmnopqrstuvwxyz0123456789",
		"timeout": "1h", "lease_ttl": "60s", "config_hash": "sha256:0123456789abcdef", "scope": "project-42",
		"variables": vars,
	})
	if err != nil {
		panic(err)
	}
	return b
}

func BenchmarkParseSpec100(b *testing.B) {
	raw := benchSpec(100)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := jobspec.ParseSpec(raw)
		if err != nil {
			b.Fatal(err)
		}
		s.Wipe()
	}
}

func BenchmarkSpecEnv100(b *testing.B) {
	s, err := jobspec.ParseSpec(benchSpec(100))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Wipe()
	b.ReportAllocs()
	for b.Loop() {
		env := s.Env("CI_JOB_TOKEN", "/run/warmpod/jobs/1234567")
		if len(env) != 101 {
			b.Fatalf("len(env) = %d", len(env))
		}
	}
}

func BenchmarkRenderExports100(b *testing.B) {
	s, err := jobspec.ParseSpec(benchSpec(100))
	if err != nil {
		b.Fatal(err)
	}
	env := s.Env("CI_JOB_TOKEN", "/run/warmpod/jobs/1234567")
	s.Wipe()
	var buf bytes.Buffer
	if err := jobspec.RenderExports(&buf, env); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if err := jobspec.RenderExports(io.Discard, env); err != nil {
			b.Fatal(err)
		}
	}
}
