package main

import (
	"flag"

	"github.com/warmpod/warmpod/internal/flagenv"
)

// parseFlags parses args into fs, then the WARMPOD_* environment twins of
// the flags args did not set: one line per bad flag or twin, naming it
// (flagenv.Parse).
func parseFlags(fs *flag.FlagSet, args []string) error {
	return flagenv.Parse(fs, args, "WARMPOD_", command(fs))
}

// applyEnv sets the flags of fs that the command line did not from their
// WARMPOD_* twins (flagenv.ApplyExplained).
func applyEnv(fs *flag.FlagSet) error { return flagenv.ApplyExplained(fs, "WARMPOD_") }

// parseArgs is parseFlags without the environment.
func parseArgs(fs *flag.FlagSet, args []string) error {
	return flagenv.ParseArgs(fs, args, command(fs))
}

// command is how the user runs fs's command: "warmpod" for PID 1's flags,
// "warmpod NAME" for a client command's.
func command(fs *flag.FlagSet) string {
	if fs.Name() == "warmpod" {
		return "warmpod"
	}
	return "warmpod " + fs.Name()
}
