package adapters

import (
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// PressPrefix opens the MessageID of a press of a button, before the
// platform's id of the press (a callback query's, an interaction's):
// unique per press, and never a message id a reply could quote.
const PressPrefix = "press:"

// Danger reports whether pressing b refuses what the message asks (its
// data is the command /deny): the platforms that colour buttons show it
// in red.
func Danger(b outbox.Button) bool {
	name, _, ok := sessions.ParseCommand(b.Data)
	return ok && name == "deny"
}

// Pressed marks in as a press of a button of the platform's message
// pressed (sessions.MetaPressed).
func Pressed(in *sessions.Inbound, pressed string) {
	if in.Meta == nil {
		in.Meta = map[string]string{}
	}
	in.Meta[sessions.MetaPressed] = pressed
}
