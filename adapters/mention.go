package adapters

import "strings"

// AfterMention is the text after a mention of the bot that opens a
// message, without the separators people type after a name (spaces, line
// breaks, a comma, a colon), so that "@herald, /stop" and "@herald:
// /stop" reach the router as the command "/stop" on every platform.
func AfterMention(rest string) string {
	return strings.TrimLeft(rest, " \t\r\n,:")
}
