// Package testkit holds what herald's tests share: a scripted model
// server, a real redis-server, the helpers every test of a background
// loop needs (Run, LogBuffer), and, in its subpackages, fake chat
// platforms (telegramfake, slackfake, discordfake).
package testkit
