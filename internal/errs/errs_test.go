package errs

import (
	"errors"
	"testing"
)

// TestMarkNotRunKeepsTheTextAndTheCode: a refusal marked and wrapped
// reads as the server's error, is Unavailable, and is found as ErrNotRun;
// an unmarked error of the same code is not.
func TestMarkNotRunKeepsTheTextAndTheCode(t *testing.T) {
	oom := errors.New("OOM command not allowed")
	err := Wrap("redis.Append", Unavailable, MarkNotRun(oom))
	if got, want := err.Error(), "redis.Append: unavailable: OOM command not allowed"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if !Is(err, Unavailable) || !errors.Is(err, ErrNotRun) || !errors.Is(err, oom) {
		t.Errorf("%v: want Unavailable, ErrNotRun and the server's error in its chain", err)
	}
	if errors.Is(Wrap("redis.Append", Unavailable, errors.New("i/o timeout")), ErrNotRun) {
		t.Error("an unmarked error is ErrNotRun")
	}
	if MarkNotRun(nil) != nil {
		t.Error("MarkNotRun(nil) is not nil")
	}
}
