package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/certs"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// Issue 12 "optionally mTLS": the admin commands speak to an admin.tls listener with --cert/--key/--cacert
// (or ANKUSA_ADMIN_CERT/_KEY/_CACERT) and need no token when the certificate names a principal.
func TestAdminCommandsOverMutualTLS(t *testing.T) {
	ca := certs.NewCA(t, "cli-ca")
	srv, ops, stranger := ca.Server(t, "cli-server"), ca.Client(t, "cli-ops"), ca.Client(t, "cli-stranger")
	inst := fixture.Instance(t, "climtls", func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("acme", 1)}
		cfg.Admin.TLS = config.TLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: ca.File, ClientAuth: "require"}
		cfg.Admin.Principals = []config.Principal{
			{Name: "ops", ClientCertSHA256: ops.SHA256, Scopes: config.AdminScopes, Tenants: []string{"*"}},
		}
	}, nil)
	url := "https://" + inst.AdminAddr()
	cli := func(env map[string]string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut, envOf(env))
		return code, out.String(), errOut.String()
	}
	code, out, errOut := cli(nil, "dlq", "list", "--admin-url", url, "--cert", ops.CertFile, "--key", ops.KeyFile, "--cacert", ca.File)
	if code != 0 || !strings.Contains(out, "total 0") {
		t.Fatalf("dlq list with --cert: exit %d, out %q, err %q", code, out, errOut)
	}
	env := map[string]string{"ANKUSA_ADMIN_CERT": ops.CertFile, "ANKUSA_ADMIN_KEY": ops.KeyFile, "ANKUSA_ADMIN_CACERT": ca.File}
	if code, out, errOut = cli(env, "quarantine", "list", "--admin-url", url, "-o", "json"); code != 0 || !strings.Contains(out, `"entries":[]`) {
		t.Fatalf("quarantine list with ANKUSA_ADMIN_CERT: exit %d, out %q, err %q", code, out, errOut)
	}
	if code, _, errOut = cli(nil, "dlq", "list", "--admin-url", url, "--cert", stranger.CertFile, "--key", stranger.KeyFile, "--cacert", ca.File); code != exitAuth {
		t.Fatalf("an unknown certificate exits %d (%s), want %d", code, errOut, exitAuth)
	}
	if code, _, errOut = cli(map[string]string{"ANKUSA_ADMIN_TOKEN": "any"}, "dlq", "list", "--admin-url", url, "--cacert", ca.File); code != exitUnavailable {
		t.Fatalf("no certificate under client_auth require exits %d (%s), want %d (the handshake fails)", code, errOut, exitUnavailable)
	}
	if code, _, _ = cli(nil, "dlq", "list", "--admin-url", url, "--cert", ops.CertFile, "--cacert", ca.File); code != exitUsage {
		t.Fatalf("--cert without --key exits %d, want %d", code, exitUsage)
	}
}
