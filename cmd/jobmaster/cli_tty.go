package main

import (
	"io"
	"os"
)

// termSize is a terminal's size in characters; zero when unknown.
type termSize struct {
	width, height int
}

// detectTerminal reports whether w is an interactive terminal that can
// redraw in place (not TERM=dumb), and its size.
func detectTerminal(w io.Writer) (termSize, bool) {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return termSize{}, false
	}
	return fdTerminal(int(f.Fd()))
}
