package scenario

import (
	"fmt"
	"os"
	"strings"
)

// A script is a scenario file: blocks of
//
//	command arg key=value ...
//	optional input lines (a job spec)
//	----
//	expected output
//
// separated by blank lines, with '#' comment lines between blocks. The
// expected output ends at the first blank line, so output never contains
// one.
type script struct {
	path  string
	items []item
}

// item is one element of a script, in file order: a line kept as it is (a
// comment or a blank line) or a block.
type item struct {
	raw   string
	block *block
}

// block is one command with its input and expected output.
type block struct {
	line  int // line number of the command, from 1
	cmd   command
	input []string
	want  []string
	got   []string // set when the block has run
}

// command is a parsed command line.
type command struct {
	text  string // the line as written
	name  string
	args  []string
	kv    map[string]string
	input string
}

func (c command) String() string { return c.text }

// parseCommand splits "name pos1 pos2 key=value" into its parts.
func parseCommand(line string) command {
	fields := strings.Fields(line)
	c := command{text: strings.TrimSpace(line), kv: map[string]string{}}
	if len(fields) == 0 {
		return c
	}
	c.name = fields[0]
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			c.kv[k] = v
		} else {
			c.args = append(c.args, f)
		}
	}
	return c
}

const separator = "----"

func readScript(path string) (*script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseScript(path, string(data))
}

func parseScript(path, text string) (*script, error) {
	s := &script{path: path}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	const (
		outside = iota
		input
		output
	)
	state := outside
	var cur *block
	for i, l := range lines {
		switch state {
		case outside:
			if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
				s.items = append(s.items, item{raw: l})
				continue
			}
			if l == separator {
				return nil, fmt.Errorf("%s:%d: %s without a command", path, i+1, separator)
			}
			cur = &block{line: i + 1, cmd: parseCommand(l)}
			s.items = append(s.items, item{block: cur})
			state = input
		case input:
			if l == separator {
				cur.cmd.input = strings.Join(cur.input, "\n")
				state = output
				continue
			}
			cur.input = append(cur.input, l)
		case output:
			if strings.TrimSpace(l) == "" {
				s.items = append(s.items, item{raw: l})
				state = outside
				continue
			}
			cur.want = append(cur.want, l)
		}
	}
	if state == input {
		return nil, fmt.Errorf("%s:%d: command %q has no %s line", path, cur.line, cur.cmd.text, separator)
	}
	return s, nil
}

// render writes the script back, with each block's actual output in place
// of the expected one (for -update).
func (s *script) render() string {
	var b strings.Builder
	for _, it := range s.items {
		if it.block == nil {
			b.WriteString(it.raw)
			b.WriteByte('\n')
			continue
		}
		bl := it.block
		b.WriteString(bl.cmd.text)
		b.WriteByte('\n')
		for _, l := range bl.input {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		b.WriteString(separator)
		b.WriteByte('\n')
		out := bl.want
		if bl.got != nil {
			out = bl.got
		}
		for _, l := range out {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
