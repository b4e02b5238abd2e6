package acl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every route of the masters' API, by policy: the table a reader of
// docs/security.md expects.
func TestAllowed(t *testing.T) {
	const (
		no  = false
		yes = true
	)
	for _, c := range []struct {
		method, pattern string
		read, submit    bool
		management      bool
	}{
		{"GET", "/v1/health", yes, yes, yes},
		{"POST", "/v1/acl/bootstrap", yes, yes, yes},
		{"GET", "/v1/jobs", yes, yes, yes},
		{"HEAD", "/v1/jobs", yes, yes, yes},
		{"GET", "/v1/jobs/{id}", yes, yes, yes},
		{"GET", "/v1/cluster", yes, yes, yes},
		{"GET", "/v1/state/hash", yes, yes, yes},
		{"GET", "/v1/metrics", yes, yes, yes},
		{"PUT", "/v1/jobs/{id}", no, yes, yes},
		{"POST", "/v1/jobs", no, yes, yes},
		{"POST", "/v1/jobs/{id}/cancel", no, yes, yes},
		// A task's log may hold its secrets: a GET that read may not make.
		{"GET", "/v1/jobs/{id}/logs", no, yes, yes},
		{"HEAD", "/v1/jobs/{id}/logs", no, yes, yes},
		{"GET", "/v1/operator/snapshot", no, no, yes},
		{"PUT", "/v1/operator/snapshot", no, no, yes},
		{"GET", "/v1/operator/raft/peers", no, no, yes},
		{"DELETE", "/v1/operator/raft/peers/{id}", no, no, yes},
		{"POST", "/v1/acl/tokens", no, no, yes},
		{"GET", "/v1/acl/tokens", no, no, yes},
		{"DELETE", "/v1/acl/tokens/{accessor}", no, no, yes},
		// Methods and routes without a row need management.
		{"DELETE", "/v1/jobs/{id}", no, no, yes},
		{"POST", "/v1/cluster", no, no, yes},
		{"GET", "/v1/executors/{id}/drain", no, no, yes},
		{"PATCH", "/v1/jobs", no, no, yes},
		// The catch-all only answers 404.
		{"GET", "/", yes, yes, yes},
		{"DELETE", "/", yes, yes, yes},
	} {
		for p, want := range map[Policy]bool{Read: c.read, Submit: c.submit, Management: c.management} {
			require.Equal(t, want, Allowed(p, c.method, c.pattern), "%s %s %s", p, c.method, c.pattern)
		}
		require.False(t, Allowed("", c.method, c.pattern) && Needs(c.method, c.pattern).Token(),
			"no policy meets a token need: %s %s", c.method, c.pattern)
	}
}

func TestNeeds(t *testing.T) {
	for _, c := range []struct {
		method, pattern string
		want            Need
	}{
		{"GET", "/v1/health", Nothing},
		{"HEAD", "/v1/health", Nothing},
		{"POST", "/v1/acl/bootstrap", Nothing},
		{"POST", "/v1/internal/executor-update", Node},
		{"GET", "/v1/internal/executor-update", NeedManagement},
		{"GET", "/v1/jobs", NeedRead},
		{"PUT", "/v1/jobs/{id}", NeedSubmit},
		{"GET", "/v1/jobs/{id}/logs", NeedSubmit},
		{"HEAD", "/v1/jobs/{id}/logs", NeedSubmit},
		{"POST", "/v1/jobs/{id}/logs", NeedManagement},
		{"GET", "/v1/acl/tokens", NeedManagement},
		{"GET", "/v1/nothing/here", NeedManagement},
		{"PUT", "/", Nothing},
	} {
		require.Equal(t, c.want, Needs(c.method, c.pattern), "%s %s", c.method, c.pattern)
	}
}

func TestPolicies(t *testing.T) {
	for _, p := range Policies() {
		require.True(t, p.Valid())
		got, err := ParsePolicy(string(p))
		require.NoError(t, err)
		require.Equal(t, p, got)
		// Needs that are not for a token are met by any policy.
		require.True(t, p.Satisfies(Nothing))
		require.True(t, p.Satisfies(Node))
	}
	for _, bad := range []string{"", "admin", "Read", "write"} {
		_, err := ParsePolicy(bad)
		require.ErrorContains(t, err, "use read, submit or management", bad)
		require.False(t, Policy(bad).Valid())
		require.False(t, Policy(bad).Satisfies(NeedRead), bad)
	}
	require.Equal(t, "a read, submit or management token", Describe(NeedRead))
	require.Equal(t, "a submit or management token", Describe(NeedSubmit))
	require.Equal(t, "a management token", Describe(NeedManagement))
}

// Every row of the table is a route of the API or one announced in
// DESIGN.md: a pattern starts with /v1/ or /ui/, a method is upper case.
func TestRoutesAreWellFormed(t *testing.T) {
	for r := range Routes {
		require.Contains(t, []string{"GET", "PUT", "POST", "DELETE"}, r.Method, r.String())
		require.Regexp(t, `^/(v1|ui)/`, r.Pattern, r.String())
	}
}

// A route whose need is no plain consequence of its method says why; the
// others say nothing more than their need.
func TestWhy(t *testing.T) {
	for _, m := range []string{"GET", "HEAD"} {
		require.Contains(t, Why(m, LogsPattern), "not part of the read policy", m)
	}
	require.Empty(t, Why("POST", LogsPattern))
	require.Empty(t, Why("GET", "/v1/jobs/{id}"))
	for r := range whys {
		_, ok := Routes[r]
		require.True(t, ok, "%s has a reason and no row", r)
	}
}
