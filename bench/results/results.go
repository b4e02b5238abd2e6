// Package results holds the figures a benchmark run produces, prints them
// as a table and writes them as JSON.
package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Figure is one measured number.
type Figure struct {
	// Group is what is measured ("submission", "failover", ...), Name the
	// case within it.
	Group string  `json:"group"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Extra holds the figure's companions: percentiles, counts, trials.
	Extra map[string]float64 `json:"extra,omitempty"`
	// Target is the goal in words ("<= 0.8 s"); Met is nil without one.
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// Command reproduces the figure.
	Command string `json:"command"`
	Note    string `json:"note,omitempty"`
}

// AtMost and AtLeast set the figure's target and whether it is met.
func (f *Figure) AtMost(limit float64, target string) *Figure {
	ok := f.Value <= limit
	f.Target, f.Met = target, &ok
	return f
}

// AtLeast: see AtMost.
func (f *Figure) AtLeast(limit float64, target string) *Figure {
	ok := f.Value >= limit
	f.Target, f.Met = target, &ok
	return f
}

// Run is a whole benchmark run.
type Run struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Machine  Machine   `json:"machine"`
	Figures  []*Figure `json:"figures"`
	// Errors are the benchmarks that could not produce their figures.
	Errors []string `json:"errors,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryGiB string `json:"memory_gib"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	// LoadAvg is /proc/loadavg when the run started: other work on the
	// machine shows up here.
	LoadAvg string `json:"load_avg"`
}

// Describe reads the machine's description from /proc.
func Describe() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = fmt.Sprintf("%.1f", kb/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	return m
}

// Add appends a figure and returns it, for chaining a target.
func (r *Run) Add(f Figure) *Figure {
	p := &f
	r.Figures = append(r.Figures, p)
	return p
}

// WriteJSON writes the run to path.
func (r *Run) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Print writes the table of figures, then the commands that reproduce
// them.
func (r *Run) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCASE\tVALUE\tTARGET\tMET\tDETAIL")
	for _, f := range r.Figures {
		met := ""
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\t%s\t%s\n", f.Group, f.Name, FormatValue(f.Value), f.Unit, f.Target, met, formatExtra(f.Extra))
	}
	tw.Flush()
	fmt.Fprintln(w)
	var cmds []string
	groups := map[string][]string{}
	for _, f := range r.Figures {
		if _, ok := groups[f.Command]; !ok {
			cmds = append(cmds, f.Command)
		}
		if !slices.Contains(groups[f.Command], f.Group) {
			groups[f.Command] = append(groups[f.Command], f.Group)
		}
	}
	fmt.Fprintln(w, "Commands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\n      (%s)\n", c, strings.Join(groups[c], ", "))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
}

// FormatValue prints a number with about three significant digits.
func FormatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e7:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func formatExtra(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+FormatValue(m[k]))
	}
	return strings.Join(parts, " ")
}

// Percentile is the nearest-rank percentile p (0..100) of xs: the smallest
// value with at least p% of the values at or below it. With 20 values, p99
// is the largest.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Seconds converts durations to seconds.
func Seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}
