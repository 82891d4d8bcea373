// Command herald is the one binary of the herald chat gateway. Each
// subcommand lives in its own file; Main is what both main and the tests
// construct, so a test starts herald exactly the way a user does.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal the default handling comes back, so a
		// second Ctrl-C ends a shutdown that hangs.
		<-ctx.Done()
		stop()
	}()
	os.Exit(NewMain().Run(ctx, os.Args[1:]))
}

// Exit codes, as CONTRACT.md promises them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Main is one run of the herald program: where it writes and what
// environment it reads.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// NewMain returns a Main wired to the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Run runs the command line args (without the program name) until it is
// done or ctx is cancelled, and returns the process exit code. Errors are
// reported on Stderr as one line.
func (m *Main) Run(ctx context.Context, args []string) int {
	root := m.rootCommand()
	root.SetArgs(append([]string{}, args...))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code) // the command said what went wrong itself
	}
	line := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
	var usage usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(m.Stderr, "herald: %s\nRun '%s --help' for usage.\n", line, cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(m.Stderr, "herald: %s\n", line)
	return exitFailure
}

func (m *Main) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "herald",
		Short:         "herald is a chat gateway for LLM agents",
		SilenceErrors: true, // Run prints the one error line itself
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          runGroup,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		m.versionCommand(),
		m.gatewayCommand(),
		m.configCommand(),
		m.benchCommand(),
		m.outboxCommand(),
		m.delegationsCommand(),
		m.cronCommand(),
		m.kanbanCommand(),
		m.modelCommand(),
		m.mcpCommand(),
		m.approvalsCommand(),
	)
	return root
}

// exitCode ends herald with that code and prints nothing more: the
// command has written its own lines to stderr.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// usageError marks an error in how herald was called; it exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return usageError{err}
	}
	return nil
}

// runGroup is the RunE of a command that only holds subcommands. Cobra
// would print help and exit 0 for a mistyped subcommand; herald calls that
// a usage error, and prints help only when no subcommand was named.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only when it suggests
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return usageError{errors.New(msg)}
}
