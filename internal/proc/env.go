package proc

import (
	"os"
	"slices"
	"strings"
)

// BaseEnv are the variables of herald's own environment that every
// process it starts is given: what a shell, a compiler or git needs to
// find its tools, its home, its locale and its terminal. LC_* is every
// locale variable.
var BaseEnv = []string{"PATH", "HOME", "LANG", "LC_*", "TZ", "TMPDIR", "USER", "SHELL", "TERM"}

// sensitiveWords mark a variable's name as a credential's: one of
// herald's environment whose name holds one of them reaches a process
// only when Env.Passthrough names it.
var sensitiveWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH"}

// minSecretLen is the shortest value Env.Secrets withholds by: a shorter
// one would match ordinary values.
const minSecretLen = 4

// Env builds the environment of a process herald starts for others (a
// terminal command, a cron job's script, a kanban lane's worker, a
// completion check, git, an MCP server): never herald's own environment
// whole, which holds its model keys, API key, bot tokens and store
// password. A process gets
//
//   - the variables of BaseEnv, taken from herald's environment;
//   - those Passthrough names (tools.env_passthrough), taken from it too;
//   - the variables given to Build, which are meant for it (a lane's
//     env, a card's HERALD_KANBAN_*, a cron run's HERALD_CRON_*) and
//     kept as given, last, so they win over inherited ones.
//
// Of what is taken from herald's environment, a variable Withheld names
// or whose value holds one of Secrets is never given, even passed
// through; and one whose name holds KEY, TOKEN, SECRET, PASSWORD,
// CREDENTIAL or AUTH (in any case) is given only when Passthrough names
// it. The zero Env, and a nil one, give the base set alone.
type Env struct {
	// Passthrough names the variables of herald's environment a process
	// gets beyond the base set.
	Passthrough []string
	// Withheld names the variables that hold herald's own secrets (its
	// config's secret keys' variables): never given.
	Withheld []string
	// Secrets are herald's secret values: a variable of its environment
	// that holds one is never given, whatever its name.
	Secrets []string
	// Environ reads herald's environment; nil means os.Environ.
	Environ func() []string
}

// Build returns the environment of one process: herald's variables as
// Env allows them, then given (NAME=value each).
func (e *Env) Build(given ...string) []string {
	var z Env
	if e == nil {
		e = &z
	}
	environ := e.Environ
	if environ == nil {
		environ = os.Environ
	}
	var out []string
	for _, kv := range environ() {
		name, value, ok := strings.Cut(kv, "=")
		if ok && name != "" && e.inherits(name, value) {
			out = append(out, kv)
		}
	}
	return append(out, given...)
}

// inherits reports whether the variable name=value of herald's
// environment is given to a process.
func (e *Env) inherits(name, value string) bool {
	passed := slices.Contains(e.Passthrough, name)
	switch {
	case !passed && !Base(name):
	case slices.Contains(e.Withheld, name):
	case e.holdsSecret(value):
	case !passed && Sensitive(name):
	default:
		return true
	}
	return false
}

func (e *Env) holdsSecret(value string) bool {
	for _, s := range e.Secrets {
		if len(s) >= minSecretLen && strings.Contains(value, s) {
			return true
		}
	}
	return false
}

// Base reports whether name is one of BaseEnv.
func Base(name string) bool {
	for _, b := range BaseEnv {
		if prefix, ok := strings.CutSuffix(b, "*"); ok && strings.HasPrefix(name, prefix) || b == name {
			return true
		}
	}
	return false
}

// Sensitive reports whether name (a variable's, a header's) looks like
// a credential's.
func Sensitive(name string) bool {
	upper := strings.ToUpper(name)
	for _, w := range sensitiveWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}
