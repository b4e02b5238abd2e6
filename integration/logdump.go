package integration

import (
	"os"
	"regexp"
	"strings"
)

// leadershipLine matches the master log lines that trace leadership over a
// whole run: elections, terms, epochs and starts.
var leadershipLine = regexp.MustCompile(`leadership (established|lost)|entering (leader|follower|candidate) state|election won|starting election|=== start|in cluster|state restored`)

func (c *Cluster) dumpLogs() {
	// The tails below may start after the trouble began: every master's
	// leadership history comes first, whole.
	for _, n := range c.Masters {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		var hist []string
		for _, l := range strings.Split(string(b), "\n") {
			if leadershipLine.MatchString(l) {
				hist = append(hist, l)
			}
		}
		c.t.Logf("---- leadership history of %s ----\n%s", n.ID, strings.Join(hist, "\n"))
	}
	for _, n := range append(append([]*Node{}, c.Masters...), c.Executors...) {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		if len(b) > 20000 {
			b = b[len(b)-20000:]
		}
		c.t.Logf("---- log of %s (tail) ----\n%s", n.ID, b)
	}
}
