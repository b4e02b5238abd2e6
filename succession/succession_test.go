package succession

import (
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestTimingFor(t *testing.T) {
	tm := TimingFor(250 * time.Millisecond)
	if tm.ProbeAfter != 62500*time.Microsecond || tm.ProbeEvery != 25*time.Millisecond {
		t.Fatalf("TimingFor(250ms) = %+v", tm)
	}
	// A leader heartbeats at least every hb/5: probing later than that
	// never probes a leader that merely waits for its next heartbeat.
	if tm.ProbeAfter <= 250*time.Millisecond/5 {
		t.Fatalf("ProbeAfter %s is within the heartbeat gap", tm.ProbeAfter)
	}
}

func TestShouldProbe(t *testing.T) {
	tm := Timing{ProbeAfter: 60 * time.Millisecond, ProbeEvery: 25 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		name string
		f    Follower
		want bool
	}{
		{"no leader", Follower{Now: ms(500), LastContact: t0}, false},
		{"heard recently", Follower{Now: ms(59), Leader: "m1", LastContact: t0}, false},
		{"silent, never probed", Follower{Now: ms(60), Leader: "m1", LastContact: t0}, true},
		{"silent, probed just now", Follower{Now: ms(80), Leader: "m1", LastContact: t0, LastProbe: ms(70)}, false},
		{"silent, probed a while ago", Follower{Now: ms(95), Leader: "m1", LastContact: t0, LastProbe: ms(70)}, true},
	} {
		if got := tm.ShouldProbe(tc.f); got != tc.want {
			t.Errorf("%s: ShouldProbe = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := func(id string, term, index uint64) Position { return Position{ID: id, Term: term, Index: index} }
	for _, tc := range []struct {
		name    string
		self    Position
		peers   []Position
		voters  int
		stand   bool
		nominee string
		why     string // in the reason, when set
	}{
		{"equal logs: the smaller id", p("m2", 3, 100), []Position{p("m3", 3, 100)}, 3, true, "m2", "its id is the smallest"},
		{"equal logs: not the larger id", p("m3", 3, 100), []Position{p("m2", 3, 100)}, 3, false, "m2", "survivor m2's log is as far as this master's and its id is smaller"},
		{"a longer log wins over a smaller id", p("m2", 3, 99), []Position{p("m3", 3, 100)}, 3, false, "m3", "survivor m3's log is ahead"},
		{"behind two equal survivors: not a tie of this master's", p("m3", 3, 99), []Position{p("m1", 3, 100), p("m2", 3, 100)}, 3, false, "m1", "survivor m1's log is ahead"},
		{"a later term wins over a longer log", p("m3", 4, 90), []Position{p("m2", 3, 100)}, 3, true, "m3", "this master's log is ahead of every survivor's"},
		{"no peer answered: no quorum of 3", p("m2", 3, 100), nil, 3, false, "", ""},
		{"five voters, three survivors answered", p("m1", 2, 10), []Position{p("m4", 2, 10), p("m5", 2, 9)}, 5, true, "m1", ""},
		{"five voters, two survivors answered", p("m1", 2, 10), []Position{p("m4", 2, 10)}, 5, false, "", ""},
		{"a survivor still reaches the leader", p("m2", 3, 100), []Position{{ID: "m3", Term: 3, Index: 100, Reaches: true}}, 3, false, "", ""},
		{"one of two reaches it", p("m1", 2, 10), []Position{p("m4", 2, 10), {ID: "m5", Term: 2, Index: 9, Reaches: true}}, 5, false, "", ""},
	} {
		d := Decide(tc.self, tc.peers, tc.voters)
		if d.Stand != tc.stand || d.Nominee != tc.nominee || d.Reason == "" || !strings.Contains(d.Reason, tc.why) {
			t.Errorf("%s: Decide = %+v, want stand %v nominee %q", tc.name, d, tc.stand, tc.nominee)
		}
	}
}

// Survivors that see the same positions agree: exactly one stands, and it
// is one whose log no other survivor's is ahead of (so every other grants
// it a vote).
func TestDecideOneStands(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(t, "survivors")
		var all []Position
		for i := 0; i < n; i++ {
			all = append(all, Position{ID: string(rune('a' + i)),
				Term: rapid.Uint64Range(1, 3).Draw(t, "term"), Index: rapid.Uint64Range(1, 5).Draw(t, "index")})
		}
		voters := n + 1 // the dead leader
		var standing []Position
		for i, self := range all {
			peers := slices.Delete(slices.Clone(all), i, i+1)
			if Decide(self, peers, voters).Stand {
				standing = append(standing, self)
			}
		}
		if len(standing) != 1 {
			t.Fatalf("%d survivors stand among %v", len(standing), all)
		}
		for _, o := range all {
			if o.Term > standing[0].Term || (o.Term == standing[0].Term && o.Index > standing[0].Index) {
				t.Fatalf("%v stands though %v's log is ahead", standing[0], o)
			}
		}
	})
}
