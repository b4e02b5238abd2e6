package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

// aclMaster is a fake master with ACLs on: it answers only requests that
// carry one of its tokens.
type aclMaster struct {
	srv          *httptest.Server
	mu           sync.Mutex
	tokens       map[string]api.ACLToken // by secret
	bootstrapped bool
	seen         []string // tokens of the requests
}

func newACLMaster(t *testing.T) *aclMaster {
	f := &aclMaster{tokens: map[string]api.ACLToken{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *aclMaster) addr() string { return f.srv.Listener.Addr().String() }

func (f *aclMaster) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	secret := r.Header.Get("X-Jobmaster-Token")
	f.seen = append(f.seen, secret)
	route := r.Method + " " + r.URL.Path
	if route == "POST /v1/acl/bootstrap" {
		if f.bootstrapped {
			writeJSON(w, http.StatusConflict, api.Error{Error: "ACLs are already bootstrapped"})
			return
		}
		f.bootstrapped = true
		t := api.ACLToken{AccessorID: "acc-root", SecretID: "root-secret", Name: "bootstrap", Policy: "management"}
		f.tokens[t.SecretID] = t
		writeJSON(w, http.StatusCreated, t)
		return
	}
	tok, ok := f.tokens[secret]
	if !ok {
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "this request needs an ACL token"})
		return
	}
	switch route {
	case "POST /v1/acl/tokens":
		if tok.Policy != "management" {
			writeJSON(w, http.StatusForbidden, api.Error{Error: "permission denied: token may not POST /v1/acl/tokens"})
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req api.ACLTokenRequest
		_ = json.Unmarshal(b, &req)
		t := api.ACLToken{AccessorID: "acc-" + req.Name, SecretID: "secret-" + req.Name, Name: req.Name, Policy: req.Policy}
		f.tokens[t.SecretID] = t
		writeJSON(w, http.StatusCreated, t)
	case "GET /v1/acl/tokens":
		var out api.ACLTokenList
		for _, s := range []string{"root-secret", "secret-ci"} {
			if t, ok := f.tokens[s]; ok {
				t.SecretID = ""
				out.Tokens = append(out.Tokens, t)
			}
		}
		writeJSON(w, http.StatusOK, out)
	case "DELETE /v1/acl/tokens/acc-ci":
		delete(f.tokens, "secret-ci")
		writeJSON(w, http.StatusOK, api.ACLTokenDeleted{Deleted: "acc-ci"})
	case "GET /v1/jobs":
		writeJSON(w, http.StatusOK, api.JobList{Jobs: []api.JobSummary{}})
	default:
		writeJSON(w, http.StatusNotFound, api.Error{Error: "no such endpoint"})
	}
}

func TestACLCommands(t *testing.T) {
	f := newACLMaster(t)
	env := map[string]string{addressEnv: f.addr()}
	r := cli{env: env}.run("job", "list")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "This cluster has ACLs on: give a token's secret with --token or JOBMASTER_TOKEN")

	r = cli{env: env}.run("acl", "bootstrap")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Secret ID    root-secret")
	assert.Contains(t, r.stdout, "Policy       management")
	assert.Contains(t, r.stderr, "shown only this once")
	r = cli{env: env}.run("acl", "bootstrap", "--json")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "409")

	env[tokenEnv] = "root-secret"
	r = cli{env: env}.run("acl", "token", "create", "--policy", "submit", "--name", "ci", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var doc api.ACLToken
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	assert.Equal(t, api.ACLToken{AccessorID: "acc-ci", SecretID: "secret-ci", Name: "ci", Policy: "submit"}, doc)
	r = cli{env: env}.run("acl", "token", "create", "--policy", "root")
	assert.Equal(t, 2, r.code, "a policy that does not exist is a usage error")
	assert.Contains(t, r.stderr, "use read, submit or management")
	r = cli{env: env}.run("acl", "token", "create", "--name", "x")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "--policy is required: read, submit or management")

	r = cli{env: env}.run("acl", "token", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "ACCESSOR ID")
	assert.Contains(t, r.stdout, "acc-ci")
	assert.NotContains(t, r.stdout, "secret-ci")

	// --token wins over the variable.
	r = cli{env: env}.run("acl", "token", "create", "--policy", "read", "--name", "x", "--token", "secret-ci")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "The token's policy does not allow this")
	r = cli{env: env}.run("job", "list", "--token", "secret-ci")
	assert.Equal(t, 0, r.code, r.stderr)

	r = cli{env: env}.run("acl", "token", "delete", "acc-ci")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Deleted token acc-ci\n", r.stdout)
}

// A client command given no address, CA or token talks to a running dev
// with its CA and its management token.
func TestDevTokenIsFound(t *testing.T) {
	home := t.TempDir()
	env := func(k string) string { return map[string]string{"HOME": home}[k] }
	sec, err := newDevSecurity(filepath.Join(t.TempDir(), "tls"))
	require.NoError(t, err)
	st, err := os.Stat(sec.tokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	unpublish, err := publishDevCredentials(devCredentialsDir(env), sec)
	require.NoError(t, err)
	defer unpublish()
	d, ok := findDevCredentials(env)
	require.True(t, ok)
	assert.Equal(t, sec.token, d.readToken())

	// A dev started again on its data directory keeps its secret: the
	// cluster there was bootstrapped with it.
	again, err := newDevSecurity(sec.dir)
	require.NoError(t, err)
	assert.Equal(t, sec.token, again.token)
	fresh, err := newDevSecurity(filepath.Join(t.TempDir(), "tls"))
	require.NoError(t, err)
	assert.NotEqual(t, sec.token, fresh.token)
}

// A plain address given for a master that speaks HTTPS gets Go's bare 400;
// the CLI says what to give instead.
func TestHTTPAddressOfAnHTTPSMasterIsExplained(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	r := runCLI(strings.TrimPrefix(srv.URL, "https://"), "job", "list")
	require.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "HTTP request to an HTTPS server")
	assert.Contains(t, r.stderr, "give their addresses as https://HOST:PORT")
}
