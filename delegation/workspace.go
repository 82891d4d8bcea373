package delegation

import (
	"os"
	"path/filepath"
)

// agentsMax bounds how much of a workspace's AGENTS.md a child is given.
const agentsMax = 16 << 10

// readAgentsFile is the workspace's AGENTS.md, "" when there is none.
func readAgentsFile(workspace string) string {
	if workspace == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(workspace, "AGENTS.md"))
	if err != nil {
		return ""
	}
	if len(b) > agentsMax {
		b = b[:agentsMax]
	}
	return string(b)
}
