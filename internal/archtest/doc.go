// Package archtest holds the test that keeps herald's packages in the
// shape docs/architecture.md draws: every package in one layer, the
// dependency rules between the layers, and the map's packages table with
// one row per package. It has no code of its own; the test reads the
// module through `go list` and the map from docs/architecture.md.
package archtest
