package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// recorder is a testing.TB that keeps the cleanups and errors of a
// helper under test.
type recorder struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Cleanup(fn func()) { r.cleanups = append(r.cleanups, fn) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestRunEndsTheLoopWithTheTest(t *testing.T) {
	tests := []struct {
		desc    string
		result  error
		wantErr bool
	}{
		{desc: "a loop that returns nil", result: nil},
		{desc: "a loop that returns an error", result: errors.New("lost the connection"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := &recorder{TB: t}
			started := make(chan struct{})
			ended := make(chan struct{})
			testkit.Run(r, func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				close(ended)
				return tc.result
			})
			<-started
			select {
			case <-ended:
				t.Fatal("the loop's context ended before the test did")
			default:
			}
			for _, fn := range r.cleanups {
				fn()
			}
			<-ended
			if got := len(r.errors) > 0; got != tc.wantErr {
				t.Errorf("errors %q; want an error: %v", r.errors, tc.wantErr)
			}
		})
	}
}

func TestLogBufferTakesLinesFromManyGoroutines(t *testing.T) {
	var buf testkit.LogBuffer
	log := buf.Logger()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { log.Debug("line", "n", i) })
	}
	wg.Wait()
	if got := strings.Count(buf.String(), "msg=line"); got != 8 {
		t.Errorf("%d lines logged, want 8:\n%s", got, buf.String())
	}
}
