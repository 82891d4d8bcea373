// Package testkit holds what herald's tests share: a scripted model
// server, a real redis-server, the helpers every test of a background
// loop needs (Run, LogBuffer), and, in its subpackages, fake chat
// platforms (telegramfake, slackfake, discordfake) and the adapters
// tests share (adaptertest: fakes made of functions, and the real chat
// adapters against the fake platforms).
package testkit
