// Package e2e holds herald's end-to-end tests. They talk to gateways only
// from outside, over HTTP: gateways built with gateway.New in the test
// process (inprocess_test.go), and the herald binary run as child
// processes that the tests kill at will (kill_test.go, cluster_test.go).
// Each test has its own SQLite file or redis-server and its own scripted
// model server (internal/testkit).
//
// The tests run in parallel: the longest of them spends most of its time
// waiting on timeouts (leases, outbox claims), not working.
package e2e
