// Command ptjit records every version of a program's run-time generated or
// patched code and decodes Intel PT traces through it. See doc.go.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/ptjit/ptjit/recording"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitError carries a specific exit status out of a command. Commands that
// need a status other than 1 (ptjit run passes the program's status through)
// return one; a nil Err means "exit quietly with Code".
type exitError struct {
	Code int
	Err  error
}

func (e *exitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *exitError) Unwrap() error { return e.Err }

var rootCmd = &cobra.Command{
	Use:   "ptjit",
	Short: "Record run-time generated code and decode Intel PT through it",
	Long: `ptjit runs a program under ptrace, records every version of its executable
memory (JIT code, patched code) in SQLite, and decodes Intel PT traces with the
code bytes that were valid at each moment.`,
	SilenceUsage:  true,
	SilenceErrors: true,
	Version:       recording.VersionString(),
}

func init() {
	rootCmd.SetVersionTemplate("{{.Version}}\n")
	// a flag that does not parse is a usage error, as a bad value ptjit
	// checks itself: status 2, nothing run
	rootCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{Code: 2, Err: err} })
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the CLI and returns the process exit status.
func run(args []string) int {
	return runWith(args, os.Stdout, os.Stderr)
}

// runWith executes the CLI with the given output streams. Every flag is
// reset to its default first, so that tests can run several commands in one
// process.
func runWith(args []string, stdout, stderr io.Writer) int {
	if path := os.Getenv("PTJIT_CPUPROFILE"); path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "ptjit: PTJIT_CPUPROFILE: %v\n", err)
			return 1
		}
		defer stop()
	}
	resetFlags(rootCmd)
	rootCmd.SetArgs(args)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	err := rootCmd.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintf(stderr, "ptjit: %v\n", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "ptjit: %v\n", err)
	return 1
}

// startCPUProfile writes a Go CPU profile of this ptjit process to path
// (a new file: an existing one is refused) until the returned func runs.
// It is for measuring ptjit's own work (go tool pprof bin/ptjit path).
func startCPUProfile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func resetFlags(cmd *cobra.Command) {
	reset := func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if r, ok := f.Value.(interface{ Reset() }); ok {
			r.Reset()
		} else if sv, ok := f.Value.(pflag.SliceValue); ok {
			sv.Replace(nil)
		} else {
			f.Value.Set(f.DefValue)
		}
		f.Changed = false
	}
	cmd.Flags().VisitAll(reset)
	cmd.PersistentFlags().VisitAll(reset)
	for _, c := range cmd.Commands() {
		resetFlags(c)
	}
}
