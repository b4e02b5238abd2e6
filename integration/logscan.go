package integration

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// logReport is one data race report, panic or fatal error in a node's log
// (the binary is built with the race detector).
type logReport struct {
	Node  string
	Kind  string // race, panic, fatal
	Text  string
	Known *knownIssue
}

func (r logReport) String() string {
	if r.Known != nil {
		return fmt.Sprintf("%s on %s: %s", r.Known.ID, r.Node, r.Known.Summary)
	}
	return fmt.Sprintf("%s: %s", r.Node, r.Text)
}

// knownIssue is a product bug that the suite found and reported but that
// is not fixed yet: a log report matching every one of its signatures is
// listed as known instead of failing the tests, so the suite stays green
// and still catches every other race or panic. Set
// JOBMASTER_STRICT_KNOWN=1 to fail on known issues too; delete the entry
// once the bug is fixed.
type knownIssue struct {
	ID         string
	Summary    string
	Signatures []string
}

// knownIssues is empty: every issue the suite found is fixed. An entry
// looks like {ID: "name", Summary: "...", Signatures: []string{"func()"}}.
var knownIssues = []knownIssue{}

var (
	raceEnd  = []byte("\n==================")
	hexAddrs = regexp.MustCompile(`0x[0-9a-f]+|goroutine \d+|:\d+ \+0x[0-9a-f]+`)
)

// logReports finds every race report, panic and fatal error in the nodes'
// logs; identical reports (same stacks) of one node are listed once.
func (c *Cluster) logReports() []logReport {
	var out []logReport
	for _, n := range append(append([]*Node{}, c.Masters...), c.Executors...) {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		for _, m := range []struct{ kind, marker string }{{"race", "WARNING: DATA RACE"}, {"panic", "panic:"}, {"fatal", "fatal error:"}} {
			rest := b
			for {
				i := bytes.Index(rest, []byte(m.marker))
				if i < 0 {
					break
				}
				text := rest[i:]
				end := min(len(text), 3000)
				if m.kind == "race" {
					if j := bytes.Index(text[1:], raceEnd); j >= 0 {
						end = min(j+1, 6000)
					}
				}
				text = text[:end]
				rest = rest[i+len(m.marker):]
				key := hexAddrs.ReplaceAllString(string(text), "")
				if seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, logReport{Node: n.ID, Kind: m.kind, Text: string(text), Known: matchKnown(string(text))})
			}
		}
	}
	return out
}

// strictKnown reports whether known issues must fail the tests too.
func strictKnown() bool { return os.Getenv("JOBMASTER_STRICT_KNOWN") == "1" }

func matchKnown(text string) *knownIssue {
	if strictKnown() {
		return nil
	}
	for i := range knownIssues {
		k := &knownIssues[i]
		all := true
		for _, s := range k.Signatures {
			all = all && strings.Contains(text, s)
		}
		if all {
			return k
		}
	}
	return nil
}

// scanLogs returns the log reports that are not known issues, formatted
// for a test log, and the known ones as "<issue id> on <node>: <summary>".
func (c *Cluster) scanLogs() (bad, known []string) {
	for _, r := range c.logReports() {
		if r.Known != nil {
			known = append(known, r.String())
		} else {
			bad = append(bad, r.String())
		}
	}
	return bad, known
}
