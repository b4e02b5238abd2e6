package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"jobmaster/strictjson"
)

// Limits beyond the per-vertex ones.
const (
	MaxTotalSubtasks = 100000
	MaxNameLength    = 256
	// MaxTotalSources bounds the sources a job's inputs list, each input
	// one for every subtask of the vertex it reads: what the leader builds
	// and sends for each vertex it deploys (a dense graph of a thousand
	// vertices reading many others each is within every other bound).
	MaxTotalSources = 1_000_000
)

// Error is a validation error that names the offending field with a JSON
// path such as "vertices[1].parallelism".
type Error = strictjson.Error

var fieldErr = strictjson.Errorf

// Parse decodes a JSON job spec, rejects unknown fields, keys given twice
// in one object and trailing data, validates it and returns it
// normalized. Every error is an *Error.
func Parse(data []byte) (*Spec, error) {
	if err := tooMany(data); err != nil {
		return nil, refuseCounted(data, err)
	}
	s, ok := parseFast(data)
	if !ok {
		var err error
		if s, err = parseNaming(data); err != nil {
			// A key given twice is said first (what follows from it is the
			// lesser news), in a document that is JSON at all: the scan of
			// one that is not would cost what it holds (a megabyte of '['
			// is a million frames), where the decoder stops at its depth
			// limit.
			if utf8.Valid(data) && json.Valid(data) {
				if dup := duplicated(data); dup != nil {
					return nil, dup
				}
			}
			return nil, err
		}
	}
	if dup := duplicated(data); dup != nil {
		return nil, dup
	}
	return s, nil
}

// duplicated is the error for the first key that an object of data, valid
// JSON, holds twice, or nil.
func duplicated(data []byte) error {
	if field := strictjson.DuplicateKey(data, isEnv); field != "" {
		return fieldErr(field, "given twice: an object holds a key once (the decoder would keep the last and drop the others)")
	}
	return nil
}

// refuseCounted is Parse's error for data, which has an array with more
// elements than a spec may hold (tooMany's err): what is wrong with data
// if it is not one JSON object whose top level decodes (a syntax error,
// invalid UTF-8, trailing data, an unknown or mistyped field: what the
// decoding would have said, for tooMany's counts of such a document mean
// nothing), else err. Its vertices are not decoded: the decoder keeps the
// document, but makes nothing of each element.
func refuseCounted(data []byte, err error) error {
	var top topLevel[skipped]
	if bad := decodeStrict(data, &top, ""); bad != nil {
		return bad
	}
	return err
}

// topLevel is a spec's top level, with each vertex decoded as a V.
type topLevel[V any] struct {
	Name     string   `json:"name,omitempty"`
	Vertices []V      `json:"vertices"`
	Restart  *Restart `json:"restart,omitempty"`
	Failover string   `json:"failover,omitempty"`
}

// skipped is a JSON value left as it is: it takes no memory (a slice of
// them is no allocation, whatever its length).
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// parseFast decodes a spec in one pass and checks it: what nearly every
// submission takes. ok is false when anything is wrong with it, and when
// it holds "" anywhere (an input may spell an empty mode or distribution,
// which is refused, and which one pass cannot tell from one left out):
// parseNaming then decides, and names what is wrong. Both return the same
// spec for the same data (TestParseFastIsParseNaming).
func parseFast(data []byte) (*Spec, bool) {
	if bytes.Contains(data, []byte(`""`)) {
		return nil, false
	}
	var s Spec
	if decodeStrict(data, &s, "") != nil || Check(&s) != nil {
		return nil, false
	}
	return &s, true
}

// parseNaming is Parse decoding the top level and each vertex separately,
// so that an error inside a vertex names its index.
func parseNaming(data []byte) (*Spec, error) {
	var raw topLevel[json.RawMessage]
	if err := decodeStrict(data, &raw, ""); err != nil {
		return nil, err
	}
	s := Spec{Name: raw.Name, Restart: raw.Restart, Failover: raw.Failover, Vertices: make([]Vertex, len(raw.Vertices))}
	for i, rv := range raw.Vertices {
		if err := decodeVertex(rv, &s.Vertices[i], fmt.Sprintf("vertices[%d]", i)); err != nil {
			return nil, err
		}
	}
	if err := Check(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check applies to a spec built otherwise than by Parse (decoded from
// another encoding) every check Parse applies, and normalizes it.
func Check(s *Spec) error {
	if err := s.Normalize(); err != nil {
		return err
	}
	// Checked at submission only, as the sizes are: a name accepted
	// before still applies from the log.
	if err := checkShown("name", "", "a name", s.Name, false); err != nil {
		return err
	}
	for i, v := range s.Vertices {
		for _, k := range slices.Sorted(maps.Keys(v.Env)) {
			if err := checkShown(fmt.Sprintf("vertices[%d].env", i), fmt.Sprintf("variable name %q ", k), "a variable name", k, true); err != nil {
				return err
			}
		}
	}
	if err := checkSizes(s); err != nil {
		return err
	}
	return checkSources(s)
}

// checkSources applies MaxTotalSources to a normalized spec. Like the
// sizes, at submission only: a job accepted before the limit existed
// still applies from the replicated log.
func checkSources(s *Spec) error {
	parallelism := make(map[string]int, len(s.Vertices))
	for i := range s.Vertices {
		parallelism[s.Vertices[i].ID] = s.Vertices[i].Parallelism
	}
	sources := 0
	for i := range s.Vertices {
		for _, in := range s.Vertices[i].Inputs {
			sources += parallelism[in.From]
		}
	}
	if sources > MaxTotalSources {
		return fieldErr("vertices", "the inputs list %d sources in all (one for each subtask of the vertex an input reads), at most %d allowed", sources, MaxTotalSources)
	}
	return nil
}

// checkShown refuses, in field, text that what is shown in terminals and
// pages must not hold: control characters, and bidirectional controls
// ("invoice\u202egnp.exe" shows as "invoice...exe.png"); with invisible,
// also format characters, line or paragraph separators, variation
// selectors and the other default-ignorable code points, which show as
// nothing ("PA\u200bTH" shows as "PATH"; a name needs none, where a job's
// name may join an emoji). what names the text in the message (with a
// trailing space), noun its kind.
func checkShown(field, what, noun, text string, invisible bool) error {
	for _, r := range text {
		switch {
		case unicode.IsControl(r):
			return fieldErr(field, "%shas the control character %U: %s is shown in terminals and pages", what, r, noun)
		case unicode.Is(unicode.Bidi_Control, r):
			return fieldErr(field, "%shas the bidirectional control character %U: %s is shown in terminals and pages, and would show reordered", what, r, noun)
		case invisible && (unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)):
			return fieldErr(field, "%shas the invisible character %U: %s is shown in terminals and pages, and would look like another", what, r, noun)
		}
	}
	return nil
}

// decodeVertex decodes one vertex, and each of its inputs separately, so
// that an error inside an input names its index. An input that spells out
// an empty mode or distribution is refused: leave the field out for the
// default.
func decodeVertex(data []byte, v *Vertex, prefix string) error {
	err := decodeStrict(data, v, prefix)
	if err == nil && (len(v.Inputs) == 0 || !bytes.Contains(data, []byte(`""`))) {
		return nil // no input can spell an empty mode or distribution
	}
	// The inputs alone, to name the index of one that is wrong (encoding/json
	// names no index, and no field at all for an unknown one).
	var raw struct {
		Inputs []json.RawMessage `json:"inputs"`
	}
	if json.Unmarshal(data, &raw) != nil {
		return err
	}
	for j, ri := range raw.Inputs {
		f := fmt.Sprintf("%s.inputs[%d]", prefix, j)
		var in Input
		if err := decodeStrict(ri, &in, f); err != nil {
			return err
		}
		var spelled struct {
			Mode         *string `json:"mode"`
			Distribution *string `json:"distribution"`
		}
		_ = json.Unmarshal(ri, &spelled) // decoded strictly above
		if spelled.Mode != nil && *spelled.Mode == "" {
			return fieldErr(f+".mode", "must be %q or %q, got \"\" (leave it out for %q)", ModePipelined, ModeBlocking, ModePipelined)
		}
		if spelled.Distribution != nil && *spelled.Distribution == "" {
			return fieldErr(f+".distribution", "must be %q or %q, got \"\" (leave it out for %q)", DistributionAllToAll, DistributionForward, DistributionAllToAll)
		}
	}
	return err
}

// decodeStrict decodes one JSON value of a spec, rejecting unknown
// fields, trailing data and invalid UTF-8; errors name fields under prefix.
func decodeStrict(data []byte, v any, prefix string) error {
	return strictjson.Decode(data, v, prefix, "job spec")
}

// isEnv reports whether the object under key is a vertex's env: a map,
// whose keys (variable names) differ when only their case does.
func isEnv(key string) bool { return strings.EqualFold(key, "env") }

// Normalize validates the spec in place and fills in every default, so that
// two specs meaning the same thing become equal.
func (s *Spec) Normalize() error {
	if len(s.Name) > MaxNameLength {
		return fieldErr("name", "longer than %d bytes", MaxNameLength)
	}
	if len(s.Vertices) == 0 {
		return fieldErr("vertices", "a job needs at least one vertex")
	}
	if len(s.Vertices) > MaxVertices {
		return fieldErr("vertices", "%d vertices, at most %d allowed", len(s.Vertices), MaxVertices)
	}
	index := make(map[string]int, len(s.Vertices))
	total := 0
	for i := range s.Vertices {
		v := &s.Vertices[i]
		f := fmt.Sprintf("vertices[%d]", i)
		if err := checkName(f+".id", v.ID); err != nil {
			return err
		}
		if j, dup := index[v.ID]; dup {
			return fieldErr(f+".id", "duplicate vertex id %q (also vertices[%d])", v.ID, j)
		}
		index[v.ID] = i
		if v.Parallelism < 1 || v.Parallelism > MaxParallelism {
			if v.Parallelism == 0 {
				return fieldErr(f+".parallelism", "must be between 1 and %d, got 0 (or left out: it is required)", MaxParallelism)
			}
			return fieldErr(f+".parallelism", "must be between 1 and %d, got %d", MaxParallelism, v.Parallelism)
		}
		total += v.Parallelism
		if len(v.Command) == 0 || v.Command[0] == "" {
			return fieldErr(f+".command", "must name a program to run")
		}
		for a, arg := range v.Command {
			if strings.ContainsRune(arg, 0) {
				// No process can be given it: every attempt would fail.
				return fieldErr(fmt.Sprintf("%s.command[%d]", f, a), "contains a NUL byte")
			}
		}
		if err := normalizeResources(f, v); err != nil {
			return err
		}
		for k, val := range v.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fieldErr(f+".env", "invalid variable name %q", k)
			}
			if strings.HasPrefix(k, "JOBMASTER_") {
				return fieldErr(f+".env."+k, "JOBMASTER_ variables are set by the executor")
			}
			if strings.ContainsRune(val, 0) {
				return fieldErr(f+".env."+k, "value contains a NUL byte")
			}
		}
		if len(v.Env) == 0 {
			v.Env = nil
		}
		if v.SlotSharingGroup == "" {
			v.SlotSharingGroup = DefaultSlotSharingGroup
		} else if err := checkName(f+".slot_sharing_group", v.SlotSharingGroup); err != nil {
			return err
		}
	}
	if total > MaxTotalSubtasks {
		return fieldErr("vertices", "%d subtasks in all, at most %d allowed", total, MaxTotalSubtasks)
	}
	for i := range s.Vertices {
		v := &s.Vertices[i]
		seen := make(map[string]bool, len(v.Inputs))
		for j := range v.Inputs {
			in := &v.Inputs[j]
			f := fmt.Sprintf("vertices[%d].inputs[%d]", i, j)
			if _, ok := index[in.From]; !ok {
				return fieldErr(f+".from", "unknown vertex %q", in.From)
			}
			if in.From == v.ID {
				return fieldErr(f+".from", "vertex %q cannot consume itself (cycle)", v.ID)
			}
			if seen[in.From] {
				return fieldErr(f+".from", "duplicate input from %q", in.From)
			}
			seen[in.From] = true
			switch in.Mode {
			case "":
				in.Mode = ModePipelined
			case ModePipelined, ModeBlocking:
			default:
				return fieldErr(f+".mode", "must be %q or %q, got %q", ModePipelined, ModeBlocking, in.Mode)
			}
			switch in.Distribution {
			case "", DistributionAllToAll:
				in.Distribution = ""
			case DistributionForward:
				if p := s.Vertices[index[in.From]].Parallelism; p != v.Parallelism {
					return fieldErr(f+".distribution", "a forward edge needs equal parallelism on both sides: %q has %d, %q has %d",
						in.From, p, v.ID, v.Parallelism)
				}
			default:
				return fieldErr(f+".distribution", "must be %q or %q, got %q", DistributionAllToAll, DistributionForward, in.Distribution)
			}
		}
		if len(v.Inputs) == 0 {
			v.Inputs = nil
		}
	}
	if cycle := findCycle(s, index); cycle != nil {
		return fieldErr("vertices", "the job graph has a cycle: %s", strings.Join(cycle, " -> "))
	}
	switch s.Failover {
	case "":
		s.Failover = FailoverRegion
	case FailoverRegion, FailoverFull:
	default:
		return fieldErr("failover", "must be %q or %q, got %q", FailoverRegion, FailoverFull, s.Failover)
	}
	if s.Restart == nil {
		s.Restart = &Restart{Strategy: StrategyFixedDelay, Attempts: omitted, Jitter: omitted, Delay: omitted}
	}
	return s.Restart.normalize()
}

// checkName accepts identifiers that can appear in an execution id
// (<job>/<vertex>/<subtask>/<attempt>): letters, digits, '.', '_' and '-'.
func checkName(field, v string) error {
	if err := CheckID(v); err != nil {
		return fieldErr(field, "%s", err.Error())
	}
	return nil
}

// CheckID validates a job or vertex id: 1 to 128 characters from letters,
// digits, '.', '_' and '-', not "." or "..".
func CheckID(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	if len(v) > MaxIDLength {
		return fmt.Errorf("longer than %d characters", MaxIDLength)
	}
	if v == "." || v == ".." {
		return fmt.Errorf("%q is not allowed", v)
	}
	for _, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%q has the character %q; use letters, digits, '.', '_' and '-'", v, r)
		}
	}
	return nil
}

// findCycle returns the vertex ids along a cycle of the job graph, or nil.
func findCycle(s *Spec, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(s.Vertices))
	parent := make([]int, len(s.Vertices))
	var cycle []string
	var visit func(i int) bool
	// Edges run from a consumer to its producers; a cycle either way is a cycle.
	visit = func(i int) bool {
		color[i] = grey
		for _, in := range s.Vertices[i].Inputs {
			j := index[in.From]
			switch color[j] {
			case grey:
				cycle = []string{s.Vertices[j].ID}
				for k := i; k != j; k = parent[k] {
					cycle = append(cycle, s.Vertices[k].ID)
				}
				cycle = append(cycle, s.Vertices[j].ID)
				return true
			case white:
				parent[j] = i
				if visit(j) {
					return true
				}
			}
		}
		color[i] = black
		return false
	}
	for i := range s.Vertices {
		if color[i] == white && visit(i) {
			return cycle
		}
	}
	return nil
}

// Defaults of the restart strategies (documented in docs/configuration.md).
const (
	DefaultFixedDelayAttempts  = 3
	DefaultRestartDelay        = Duration(time.Second)
	DefaultInitialDelay        = Duration(time.Second)
	DefaultMaxDelay            = Duration(time.Minute)
	DefaultMultiplier          = 2.0
	DefaultJitter              = 0.1
	DefaultResetThreshold      = Duration(time.Hour)
	DefaultFailureRateMax      = 1
	DefaultFailureRateInterval = Duration(time.Minute)
	maxRestartDuration         = Duration(24 * time.Hour)

	// omitted marks attempts, delay or jitter left out of the JSON, so that
	// the default applies; an explicit 0 means zero.
	omitted = -987654321
)

// UnmarshalJSON decodes a restart strategy field by field, so that every
// error names its field, and tells an omitted attempts, delay or jitter (the
// default applies) from an explicit 0.
func (r *Restart) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return &Error{Field: "restart", Msg: "want an object such as {\"strategy\": \"fixed-delay\"}"}
	}
	*r = Restart{Attempts: omitted, Jitter: omitted, Delay: omitted}
	targets := map[string]any{
		"strategy": &r.Strategy, "attempts": &r.Attempts, "delay": &r.Delay,
		"initial_delay": &r.InitialDelay, "max_delay": &r.MaxDelay, "multiplier": &r.Multiplier,
		"jitter": &r.Jitter, "reset_threshold": &r.ResetThreshold, "max_failures": &r.MaxFailures, "interval": &r.Interval,
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		target, ok := targets[k]
		if !ok {
			msg := "unknown field"
			if near := strictjson.SuggestField(r, k); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			return &Error{Field: "restart." + strictjson.Short(k), Msg: msg}
		}
		if err := json.Unmarshal(fields[k], target); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				return fieldErr("restart."+k, "want %s, got JSON %s", strictjson.KindOf(typ.Type), typ.Value)
			}
			return &Error{Field: "restart." + k, Msg: err.Error()}
		}
	}
	switch {
	case r.Attempts != omitted && r.Attempts < 0:
		return fieldErr("restart.attempts", "must not be negative, got %d", r.Attempts)
	case r.Delay != omitted && r.Delay < 0:
		return fieldErr("restart.delay", "must not be negative, got %s", r.Delay.Std())
	case r.Jitter != omitted && (r.Jitter < 0 || r.Jitter > 1):
		return fieldErr("restart.jitter", "must be between 0 and 1, got %g", r.Jitter)
	}
	return nil
}

func (r *Restart) normalize() error {
	attemptsSet := r.Attempts != omitted && r.Attempts != 0
	jitterSet := r.Jitter != omitted && r.Jitter != 0
	delaySet := r.Delay != omitted && r.Delay != 0
	if r.Delay == omitted {
		r.Delay = 0
		if r.Strategy == StrategyFixedDelay || r.Strategy == StrategyFailureRate {
			r.Delay = DefaultRestartDelay
		}
	}
	if r.Jitter == omitted {
		r.Jitter = 0
		if r.Strategy == StrategyExponentialDelay {
			r.Jitter = DefaultJitter
		}
	}
	if r.Attempts == omitted {
		r.Attempts = 0
		if r.Strategy == StrategyFixedDelay {
			r.Attempts = DefaultFixedDelayAttempts
		}
	} else if r.Attempts < 0 {
		return fieldErr("restart.attempts", "must not be negative, got %d", r.Attempts)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"delay", r.Delay}, {"initial_delay", r.InitialDelay}, {"max_delay", r.MaxDelay}, {"reset_threshold", r.ResetThreshold}, {"interval", r.Interval}} {
		if d.v < 0 || d.v > maxRestartDuration {
			return fieldErr("restart."+d.name, "must be between 0s and %s, got %s", maxRestartDuration.Std(), d.v.Std())
		}
	}
	unused := func(names ...string) error {
		for _, n := range names {
			set := false
			switch n {
			case "attempts":
				set = attemptsSet
			case "delay":
				set = delaySet
			case "initial_delay":
				set = r.InitialDelay != 0
			case "max_delay":
				set = r.MaxDelay != 0
			case "multiplier":
				set = r.Multiplier != 0
			case "jitter":
				set = jitterSet
			case "reset_threshold":
				set = r.ResetThreshold != 0
			case "max_failures":
				set = r.MaxFailures != 0
			case "interval":
				set = r.Interval != 0
			}
			if set {
				return fieldErr("restart."+n, "not used by strategy %q", r.Strategy)
			}
		}
		return nil
	}
	switch r.Strategy {
	case StrategyNone:
		return unused("attempts", "delay", "initial_delay", "max_delay", "multiplier", "jitter", "reset_threshold", "max_failures", "interval")
	case StrategyFixedDelay:
		return unused("initial_delay", "max_delay", "multiplier", "jitter", "reset_threshold", "max_failures", "interval")
	case StrategyFailureRate:
		if r.MaxFailures < 0 {
			return fieldErr("restart.max_failures", "must not be negative, got %d", r.MaxFailures)
		}
		if r.MaxFailures == 0 {
			r.MaxFailures = DefaultFailureRateMax
		}
		if r.Interval == 0 {
			r.Interval = DefaultFailureRateInterval
		}
		return unused("attempts", "initial_delay", "max_delay", "multiplier", "jitter", "reset_threshold")
	case StrategyExponentialDelay:
		if r.InitialDelay == 0 {
			r.InitialDelay = DefaultInitialDelay
		}
		if r.MaxDelay == 0 {
			r.MaxDelay = DefaultMaxDelay
		}
		if r.MaxDelay < r.InitialDelay {
			return fieldErr("restart.max_delay", "must be at least initial_delay (%s), got %s", r.InitialDelay.Std(), r.MaxDelay.Std())
		}
		if r.Multiplier == 0 {
			r.Multiplier = DefaultMultiplier
		}
		if r.Multiplier < 1 || r.Multiplier > 100 {
			return fieldErr("restart.multiplier", "must be between 1 and 100, got %g", r.Multiplier)
		}
		if r.Jitter < 0 || r.Jitter > 1 {
			return fieldErr("restart.jitter", "must be between 0 and 1, got %g", r.Jitter)
		}
		if r.ResetThreshold == 0 {
			r.ResetThreshold = DefaultResetThreshold
		}
		return unused("delay", "max_failures", "interval")
	case "":
		return fieldErr("restart.strategy", "missing; use one of none, fixed-delay, exponential-delay, failure-rate")
	default:
		return fieldErr("restart.strategy", "unknown strategy %q; use one of none, fixed-delay, exponential-delay, failure-rate", r.Strategy)
	}
}
