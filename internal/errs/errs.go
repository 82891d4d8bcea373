// Package errs is herald's one error style: every error a store or a
// domain package returns carries the operation that failed and a Code that
// callers branch on. User-facing wording is produced at the chat edge from
// the code, never by matching strings.
package errs

import (
	"errors"
	"fmt"
)

// Code classifies an error. Callers branch on codes, not on messages.
type Code string

const (
	// Invalid: the caller's input is malformed (empty key, bad field).
	Invalid Code = "invalid"
	// TooLarge: the input is over a configured size limit.
	TooLarge Code = "too_large"
	// NotFound: the named thing does not exist.
	NotFound Code = "not_found"
	// Conflict: the thing exists already or is in the wrong state.
	Conflict Code = "conflict"
	// LeaseLost: the caller's lease was taken over or released; nothing
	// was written under it.
	LeaseLost Code = "lease_lost"
	// Closed: the store (or service) was closed.
	Closed Code = "closed"
	// Unavailable: a dependency (Redis, disk) could not be reached; retry.
	Unavailable Code = "unavailable"
	// Internal: a bug or an unexpected state.
	Internal Code = "internal"
)

// Error is an error with an operation and a code.
type Error struct {
	Op   string // the operation, e.g. "sqlite.Append"
	Code Code
	Msg  string // a short human-readable reason
	Err  error  // the underlying error, if any
}

func (e *Error) Error() string {
	s := e.Op + ": " + string(e.Code)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// E builds an *Error. The message is formatted with fmt.Sprintf.
func E(op string, code Code, format string, args ...any) *Error {
	return &Error{Op: op, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap builds an *Error around err. A nil err gives nil. An err that
// already carries a code keeps it, so a wrapped LeaseLost stays LeaseLost.
func Wrap(op string, code Code, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return &Error{Op: op, Code: e.Code, Err: err}
	}
	return &Error{Op: op, Code: code, Err: err}
}

// CodeOf reports the code of the first *Error in err's chain, or Internal
// for an error without one, or "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }

// ErrNotRun is what errors.Is finds in an error a store marked with
// MarkNotRun: the store call that failed did not run (a Redis server
// refused it, out of memory, read-only, loading; or it was never sent),
// so it changed nothing, where a call whose connection failed may have
// been carried out all the same. Such errors are Unavailable: retry. An
// operation made of several calls returns the error of the one that
// failed, and those before it may have run: the mark says that an
// operation changed nothing only for an operation of one call (an outbox
// claim on one server, a turn's commit), which is where the delivery
// worker reads it.
var ErrNotRun = errors.New("refused before anything was done")

// MarkNotRun returns err, its text unchanged, marked as ErrNotRun; nil for
// nil.
func MarkNotRun(err error) error {
	if err == nil {
		return nil
	}
	return notRun{err}
}

type notRun struct{ error }

func (r notRun) Unwrap() error        { return r.error }
func (r notRun) Is(target error) bool { return target == ErrNotRun }

// Reason is err's message for a person: the reason the first *Error in
// its chain with one carries, without the operation and code that mean
// nothing to them; err's whole text when none does.
func Reason(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if he, ok := e.(*Error); ok && he.Msg != "" {
			return he.Msg
		}
	}
	return err.Error()
}
