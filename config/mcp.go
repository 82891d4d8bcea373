package config

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// mcpName is what a server's name may be: it is part of its tools'
// names (mcp_<server>_<tool>).
var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// checkMCP checks mcp_servers: each server is a command or a URL, not
// both; its name fits a tool name; its URL is http(s); its durations are
// positive when given; its filters are globs.
func (c Config) checkMCP(v *validator) {
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		s := c.MCPServers[name]
		key := "mcp_servers." + name
		if !mcpName.MatchString(name) {
			v.add(key, "a server's name is letters, digits, '_' or '-' (it is part of its tools' names)")
		}
		switch hasCmd, hasURL := strings.TrimSpace(s.Command) != "", strings.TrimSpace(s.URL) != ""; {
		case hasCmd && hasURL:
			v.add(key, "set command (a stdio server) or url (a streamable HTTP server), not both")
		case !hasCmd && !hasURL:
			v.add(key, "set command (a stdio server) or url (a streamable HTTP server)")
		case hasURL:
			if msg := checkHTTPURL(s.URL); msg != "" {
				v.add(key+".url", "%s", msg)
			}
			if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
				v.add(key, "args, env and cwd are for a command; a url server takes headers")
			}
		case len(s.Headers) > 0:
			v.add(key+".headers", "are for a url server; a command takes env")
		}
		if s.Timeout < 0 {
			v.add(key+".timeout", "must be positive, got %s", s.Timeout)
		}
		if s.ConnectTimeout < 0 {
			v.add(key+".connect_timeout", "must be positive, got %s", s.ConnectTimeout)
		}
		v.globs(key+".tools.include", s.Tools.Include)
		v.globs(key+".tools.exclude", s.Tools.Exclude)
	}
}

// globs refuses a pattern path.Match cannot read.
func (v *validator) globs(key string, patterns []string) {
	for i, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || strings.TrimSpace(p) == "" {
			v.add(fmt.Sprintf("%s[%d]", key, i), "%s is not a glob (*, ?, [a-z])", quote(p))
		}
	}
}
