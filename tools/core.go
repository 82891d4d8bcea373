package tools

import "github.com/heraldgw/herald/notes"

// Core is the toolset every agent gets: clarify, memory, send_message,
// and what capabilities add to it (media's send_file).
const Core = "core"

// CoreOptions are what the core tools need from the gateway.
type CoreOptions struct {
	// Notes keeps the memory tool's notes. Without it the memory tool is
	// left out rather than offered broken.
	Notes  notes.Store
	Memory MemoryLimits
	// AllowedTargets is send_message.allowed_targets. Empty still
	// registers send_message, which then refuses every target and says why.
	AllowedTargets []string
}

// RegisterCore registers the Core toolset in r.
// Errors: Invalid (a malformed allowed target), and Register's.
func RegisterCore(r *Registry, opts CoreOptions) error {
	targets, err := ParseTargets(opts.AllowedTargets)
	if err != nil {
		return err
	}
	tools := []Tool{Clarify()}
	if opts.Notes != nil {
		tools = append(tools, Memory(opts.Notes, opts.Memory))
	}
	tools = append(tools, SendMessage(targets))
	return r.Register(Core, tools...)
}
