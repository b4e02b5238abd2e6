package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDevCmd is `jobmaster dev`.
func newDevCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster of 3 masters and 2 executors with a demo job",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("not implemented yet")
		},
	}
}
