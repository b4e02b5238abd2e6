package main

import (
	"encoding/json"
	"io"
)

// printJSON writes v as indented JSON, as --json asks.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
