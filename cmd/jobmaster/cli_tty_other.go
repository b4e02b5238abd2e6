//go:build !linux && !darwin && !freebsd && !netbsd && !openbsd && !dragonfly

package main

// fdTerminal treats every file as a non-terminal where no terminal check is
// implemented: output is then plain lines.
func fdTerminal(fd int) (termSize, bool) {
	return termSize{}, false
}
