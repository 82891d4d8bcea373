package testkit

import (
	"slices"

	"github.com/google/go-cmp/cmp"
)

// WithoutKeys is a cmp option that compares every map[string]string as
// if it had none of keys, an empty one as nil: a test that compares whole
// values leaves out the entries another test looks at.
func WithoutKeys(keys ...string) cmp.Option {
	return cmp.Transformer("WithoutKeys", func(m map[string]string) keptEntries {
		var out keptEntries
		for k, v := range m {
			if slices.Contains(keys, k) {
				continue
			}
			if out == nil {
				out = keptEntries{}
			}
			out[k] = v
		}
		return out
	})
}

// keptEntries is a map as WithoutKeys compares it.
type keptEntries map[string]string
