// Command ptjit is the command-line front end of ptjit.
//
// Each subcommand lives in its own file and registers itself with rootCmd
// from an init function: run.go (ptjit run), history.go, show.go, diff.go,
// dump.go, decode.go, export.go. Errors are printed once, by main, as a
// single line prefixed "ptjit: "; a command that must exit with a specific
// status returns an *exitError.
//
// Must not import: internal/layers, internal/testenv, internal/testmain.
// They hold tests and test helpers; nothing that ships uses them.
package main

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
