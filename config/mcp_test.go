package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
)

func TestMCPServersDecode(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", `
mcp_servers:
  github:
    command: npx
    args: [-y, server-github]
    env: {GITHUB_TOKEN: "${GH_TOKEN}"}
    timeout: 10s
    tools: {include: ["get_*"], exclude: [delete_repo]}
  search:
    url: https://mcp.example/mcp
    headers: {Authorization: "Bearer ${SEARCH_KEY}"}
    enabled: false
`)
	c, err := config.Load(path, envOf(map[string]string{"HOME": dir}))
	if err != nil {
		t.Fatal(err)
	}
	gh, search := c.MCPServers["github"], c.MCPServers["search"]
	if !gh.On() || search.On() {
		t.Errorf("enabled: github %v, search %v; want true (the default), false", gh.On(), search.On())
	}
	if gh.CallTimeout() != 10*time.Second || search.CallTimeout() != config.DefaultMCPTimeout || gh.DialTimeout() != config.DefaultMCPConnectTimeout {
		t.Errorf("timeouts: %s %s %s", gh.CallTimeout(), search.CallTimeout(), gh.DialTimeout())
	}
	if diff := cmp.Diff(config.MCPTools{Include: []string{"get_*"}, Exclude: []string{"delete_repo"}}, gh.Tools); diff != "" {
		t.Errorf("tools filter (-want +got):\n%s", diff)
	}
	masked := c.Masked().MCPServers
	if masked["github"].Env["GITHUB_TOKEN"] != config.Mask || masked["search"].Headers["Authorization"] != config.Mask {
		t.Errorf("masked env %v, headers %v", masked["github"].Env, masked["search"].Headers)
	}
	if c.MCPServers["search"].Headers["Authorization"] != "Bearer ${SEARCH_KEY}" {
		t.Errorf("Masked changed the config it copied: %v", c.MCPServers["search"].Headers)
	}
}

func TestMCPServersUnknownKey(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", "mcp_servers:\n  gh:\n    command: x\n    comand: y\n")
	_, err := config.Load(path, envOf(map[string]string{"HOME": dir}))
	if err == nil || !strings.Contains(err.Error(), "mcp_servers.gh.comand") {
		t.Fatalf("err = %v, want the unknown key named", err)
	}
}

func TestMCPServersValidate(t *testing.T) {
	c := config.Default()
	c.Home = t.TempDir()
	c.MCPServers = map[string]config.MCPServer{
		"both":     {Command: "x", URL: "https://a.example"},
		"neither":  {},
		"bad name": {Command: "x"},
		"ftp":      {URL: "ftp://a.example"},
		"slow":     {Command: "x", Timeout: -time.Second, ConnectTimeout: -time.Second},
		"glob":     {Command: "x", Tools: config.MCPTools{Include: []string{"[a"}}},
		"ok":       {URL: "http://localhost:1/mcp", Headers: map[string]string{"X": "y"}},
	}
	var ps config.Problems
	if err := c.Validate(); !errors.As(err, &ps) {
		t.Fatalf("Validate = %v, want problems", err)
	}
	want := config.Problems{
		{Key: "mcp_servers.bad name", Msg: "a server's name is letters, digits, '_' or '-' (it is part of its tools' names)"},
		{Key: "mcp_servers.both", Msg: "set command (a stdio server) or url (a streamable HTTP server), not both"},
		{Key: "mcp_servers.ftp.url", Msg: `malformed URL: scheme "ftp" is not http or https`},
		{Key: "mcp_servers.glob.tools.include[0]", Msg: `"[a" is not a glob (*, ?, [a-z])`},
		{Key: "mcp_servers.neither", Msg: "set command (a stdio server) or url (a streamable HTTP server)"},
		{Key: "mcp_servers.slow.timeout", Msg: "must be positive, got -1s"},
		{Key: "mcp_servers.slow.connect_timeout", Msg: "must be positive, got -1s"},
	}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
