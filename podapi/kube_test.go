package podapi

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromEnv(t *testing.T) {
	full := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1",
		"KUBERNETES_SERVICE_PORT": "443",
		"POD_NAME":                "warm-1",
		"POD_NAMESPACE":           "ci",
		"POD_UID":                 "0b7e2c4e-1111-2222-3333-444455556666",
	}
	without := func(keys ...string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for _, k := range keys {
			delete(m, k)
		}
		return m
	}
	with := func(k, v string) map[string]string { m := without(); m[k] = v; return m }

	cases := []struct {
		name        string
		env         map[string]string
		noToken     bool
		noCA        bool
		nsFile      string // content of saDir/namespace; "" = no file
		emptySADir  bool   // pass "" to FromEnv (default dir, absent here)
		wantHost    string
		wantNS      string
		wantErr     []string // substrings the error must name
		notInClustr bool
	}{
		{name: "complete", env: full, wantHost: "https://10.96.0.1:443", wantNS: "ci"},
		{name: "ipv6 host is bracketed", env: with("KUBERNETES_SERVICE_HOST", "fd00:10:96::1"), wantHost: "https://[fd00:10:96::1]:443", wantNS: "ci"},
		{name: "kube-e2e loopback", env: with("KUBERNETES_SERVICE_PORT", "6443"), wantHost: "https://10.96.0.1:6443", wantNS: "ci"},
		{name: "namespace from the service-account dir", env: without("POD_NAMESPACE"), nsFile: "ci-from-file\n", wantHost: "https://10.96.0.1:443", wantNS: "ci-from-file"},
		{name: "missing POD_NAME", env: without("POD_NAME"), wantErr: []string{"POD_NAME"}},
		{name: "missing POD_NAMESPACE and no namespace file", env: without("POD_NAMESPACE"), wantErr: []string{"POD_NAMESPACE"}},
		{name: "missing POD_UID", env: without("POD_UID"), wantErr: []string{"POD_UID"}},
		{name: "blank POD_UID", env: with("POD_UID", "  "), wantErr: []string{"POD_UID"}},
		{name: "missing token file", env: full, noToken: true, wantErr: []string{"token file", "no such file"}},
		{name: "missing CA file", env: full, noCA: true, wantErr: []string{"CA file", "ca.crt"}},
		{name: "missing service host", env: without("KUBERNETES_SERVICE_HOST"), wantErr: []string{"KUBERNETES_SERVICE_HOST"}, notInClustr: true},
		{name: "missing service port", env: without("KUBERNETES_SERVICE_PORT"), wantErr: []string{"KUBERNETES_SERVICE_PORT"}, notInClustr: true},
		{name: "default dir absent", env: full, emptySADir: true, wantErr: []string{DefaultServiceAccountDir + "/token", DefaultServiceAccountDir + "/ca.crt"}},
		{
			name: "everything missing is named at once", env: map[string]string{}, noToken: true, noCA: true,
			wantErr:     []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAME", "POD_NAMESPACE", "POD_UID", "token file", "CA file"},
			notInClustr: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.emptySADir {
				if _, err := os.Stat(DefaultServiceAccountDir); err == nil {
					t.Skip("running inside a pod: the default service-account dir exists")
				}
			}
			dir := t.TempDir()
			if !tc.noToken {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600))
			}
			if !tc.noCA {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("pem"), 0o644))
			}
			if tc.nsFile != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "namespace"), []byte(tc.nsFile), 0o644))
			}
			saDir := dir
			if tc.emptySADir {
				saDir = ""
			}
			c, err := FromEnv(func(k string) string { return tc.env[k] }, saDir)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					require.Contains(t, err.Error(), w)
				}
				require.Equal(t, tc.notInClustr, errors.Is(err, ErrNotInCluster), "ErrNotInCluster wrapped iff host/port missing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, Config{
				Host:      tc.wantHost,
				TokenFile: filepath.Join(dir, "token"),
				CAFile:    filepath.Join(dir, "ca.crt"),
				Pod:       Identity{Name: "warm-1", Namespace: tc.wantNS, UID: full["POD_UID"]},
			}, c)
		})
	}
}
