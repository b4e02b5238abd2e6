package macro

import (
	"bufio"
	"math"
	"os"
	"regexp"
	"time"

	"jobmaster/bench/cluster"
	"jobmaster/bench/results"
)

// phases is where one failover trial's time went, from the survivors' logs
// (every process runs on the same machine, so their clocks are the
// harness's; the logs' times are to the millisecond):
//   - detect: the kill to the first survivor's "leader's process is gone"
//     (its probe was refused); zero when no survivor logged one (Raft's
//     own timeout elected the next leader);
//   - elect: from there to the new leader learning it won (the start of
//     its session);
//   - barrier and epoch: the new leader's Barrier, then the commit of
//     establish-leadership (both from its "leadership established" line);
//   - write: from the epoch's commit to the first accepted write's answer.
type phases struct {
	detect, elect, barrier, epoch, write time.Duration
	ok                                   bool
}

var (
	logTime     = regexp.MustCompile(`^time=(\S+) `)
	goneLine    = regexp.MustCompile(`msg="leader's process is gone"`)
	establishRe = regexp.MustCompile(`msg="leadership established" .*token=(\d+) .*took=(\S+) barrier=(\S+)`)
)

// trialPhases reads the survivors' logs for the trial that killed the
// leader at t0 and whose first write was accepted at tw: the first
// leadership established after t0 is the new leader's.
func trialPhases(survivors []*cluster.Node, t0, tw time.Time) phases {
	var p phases
	var gone, won, established time.Time
	var barrier time.Duration
	for _, n := range survivors {
		f, err := os.Open(n.LogPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			m := logTime.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			// The log's time is to the millisecond: a line up to 1 ms
			// before t0 may be after it.
			if err != nil || at.Before(t0.Add(-time.Millisecond)) || at.After(tw.Add(time.Second)) {
				continue
			}
			if goneLine.MatchString(line) && (gone.IsZero() || at.Before(gone)) {
				gone = at
			}
			if e := establishRe.FindStringSubmatch(line); e != nil && established.IsZero() {
				took, err1 := time.ParseDuration(e[2])
				b, err2 := time.ParseDuration(e[3])
				if err1 == nil && err2 == nil {
					established, barrier = at, b
					won = at.Add(-took)
				}
			}
		}
		f.Close()
	}
	if established.IsZero() {
		return p
	}
	p.ok = true
	if !gone.IsZero() {
		p.detect = nonNegative(gone.Sub(t0))
		p.elect = nonNegative(won.Sub(gone))
	} else {
		p.elect = nonNegative(won.Sub(t0))
	}
	p.barrier = barrier
	p.epoch = nonNegative(established.Sub(won) - barrier)
	p.write = nonNegative(tw.Sub(established))
	return p
}

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

// phaseFigures are the medians of each phase over the trials, in ms, for
// a figure's Extra.
func phaseFigures(ps []phases) map[string]float64 {
	var detect, elect, barrier, epoch, write []float64
	fast := 0
	for _, p := range ps {
		if !p.ok {
			continue
		}
		if p.detect > 0 {
			fast++
		}
		detect = append(detect, ms(p.detect))
		elect = append(elect, ms(p.elect))
		barrier = append(barrier, ms(p.barrier))
		epoch = append(epoch, ms(p.epoch))
		write = append(write, ms(p.write))
	}
	if len(detect) == 0 {
		return nil
	}
	return map[string]float64{
		"detect_ms_p50":  median(detect),
		"elect_ms_p50":   median(elect),
		"barrier_ms_p50": median(barrier),
		"epoch_ms_p50":   median(epoch),
		"write_ms_p50":   median(write),
		"fast_trials":    float64(fast),
	}
}

func median(xs []float64) float64 { return math.Round(results.Percentile(xs, 50)*100) / 100 }
