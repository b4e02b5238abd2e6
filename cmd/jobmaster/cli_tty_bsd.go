//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import "golang.org/x/sys/unix"

// fdTerminal reports whether fd is a terminal, and its size.
func fdTerminal(fd int) (termSize, bool) {
	if _, err := unix.IoctlGetTermios(fd, unix.TIOCGETA); err != nil {
		return termSize{}, false
	}
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return termSize{}, true
	}
	return termSize{width: int(ws.Col), height: int(ws.Row)}, true
}
