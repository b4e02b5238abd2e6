package leader

import (
	"strings"
	"testing"
	"time"

	"jobmaster/fsm"
	"jobmaster/wire"
)

func TestSlotsOf(t *testing.T) {
	for _, c := range []struct {
		claimed, want int
		ok            bool
	}{{0, 0, true}, {4, 4, true}, {wire.MaxSlots, wire.MaxSlots, true}, {wire.MaxSlots + 1, wire.MaxSlots, false}, {2_000_000_000, wire.MaxSlots, false}, {-3, 0, false}} {
		got, ok := SlotsOf(c.claimed)
		if got != c.want || ok != c.ok {
			t.Errorf("SlotsOf(%d) = %d, %v; want %d, %v", c.claimed, got, ok, c.want, c.ok)
		}
	}
}

// An executor that claims 2e9 slots, in gossip or in its reports, is
// counted with 1024, and the claim is logged once.
func TestExecutorClaimingTooManySlots(t *testing.T) {
	t0 := time.Unix(100, 0)
	st := fsm.NewState()
	read := stateReader(st)
	c := New(Config{Heartbeat: time.Second, Timeout: 15 * time.Second}, 1, t0)
	c.Refresh(t0, []Member{{ID: "e1", Addr: "e1:1", Slots: 2_000_000_000}}, nil)
	if got := c.Executors(nil, nil, t0)[0].Slots; got != wire.MaxSlots {
		t.Fatalf("gossip's claim counted as %d slots, want %d", got, wire.MaxSlots)
	}
	var warned int
	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Second)
		h, ok := c.Heartbeat(read, "e1", now)
		if !ok {
			t.Fatal("no heartbeat")
		}
		r := c.HeartbeatAnswered(read, h, &wire.Report{Version: wire.Version, Executor: "e1", Slots: 2_000_000_000}, now)
		for _, e := range r.Events {
			if strings.Contains(e.Msg, "claims a slot count") {
				warned++
			}
		}
	}
	if warned != 1 {
		t.Fatalf("the claim was logged %d times, want once", warned)
	}
	ex := c.Executors(nil, nil, t0)[0]
	if ex.Slots != wire.MaxSlots || ex.FreeSlots != wire.MaxSlots {
		t.Fatalf("report's claim counted as %d slots (%d free), want %d", ex.Slots, ex.FreeSlots, wire.MaxSlots)
	}
	free := c.freeSlots(nil, nil)
	if free != wire.MaxSlots {
		t.Fatalf("free slots %d, want %d", free, wire.MaxSlots)
	}
}
