package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"jobmaster/api"
)

func TestExecutorsDrainAndList(t *testing.T) {
	f := newFakeMaster(t)
	r := runCLI(f.addr(), "executors", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "ID  HTTP ADDR")
	assert.Regexp(t, `e1 .* 4 +2 +alive +false +-\n`, r.stdout)

	r = runCLI(f.addr(), "executors", "drain", "e1", "--deadline", "30s")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "Executor e1 is draining: no new work; what still runs at 2023-11-14T22:13:50Z moves elsewhere\n", r.stdout)
	r = runCLI(f.addr(), "executors", "list")
	assert.Regexp(t, `e1 .* alive +true +2023-11-14T22:13:50Z\n`, r.stdout)
	r = runCLI(f.addr(), "members")
	assert.Regexp(t, `DRAINING +DRAIN DEADLINE\ne1 .* true`, r.stdout, "members shows the drain too")
	r = runCLI(f.addr(), "executors", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var xs struct{ Executors []api.Executor } // as GET /v1/cluster has them
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &xs))
	require.Len(t, xs.Executors, 1)
	assert.True(t, xs.Executors[0].Draining)

	r = runCLI(f.addr(), "executors", "drain", "e1", "--disable", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res api.DrainResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, api.DrainResponse{Executor: "e1"}, res)
	r = runCLI(f.addr(), "executors", "list")
	assert.Regexp(t, `alive +false +-\n`, r.stdout)

	for _, x := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"executors", "drain", "e9"}, 1, `executor "e9" not found`},
		{[]string{"executors", "drain", "e1", "--deadline", "soon"}, 2, `--deadline "soon": want a duration`},
		{[]string{"executors", "drain", "e1", "--deadline", "-1s"}, 2, `--deadline "-1s" must not be negative: 0s moves the work at once`},
		{[]string{"executors", "drain", "e1", "--deadline", "-1s"}, 2, `--deadline "-1s"`},
		{[]string{"executors", "drain", "e1", "--disable", "--deadline", "1s"}, 2, "do not go together"},
		{[]string{"executors", "drain"}, 2, "ID"},
	} {
		r := runCLI(f.addr(), x.args...)
		assert.Equal(t, x.code, r.code, "%v: %s", x.args, r.stderr)
		assert.Contains(t, r.stderr, x.want, "%v", x.args)
	}
}
