// Package e2e holds herald's end-to-end tests. They talk to gateways only
// from outside, over HTTP: gateways built with gateway.New in the test
// process, and the herald binary run as child processes that the tests
// kill at will. Each test has its own SQLite file or redis-server and its
// own scripted model server (internal/testkit).
package e2e
