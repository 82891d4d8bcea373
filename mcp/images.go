package mcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/tools"
)

// shownTypes are the image types a model is shown; another is a line.
var shownTypes = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}

// keepImages writes the images of a call's result where herald keeps a
// conversation's files (media.FilePath, named after the turn's entry
// and the call, so a turn run again writes the same files) and returns
// them to be shown to the model. With no turn, no home or an image
// that cannot be written, none is kept: each is then a line of the
// result's text.
func (m *Manager) keepImages(ctx context.Context, turn *tools.Turn, server, tool string, res *sdk.CallToolResult) []chat.Image {
	if turn == nil || turn.Conv == "" || m.opts.Home == "" {
		return nil
	}
	var out []chat.Image
	for _, c := range res.Content {
		img, ok := c.(*sdk.ImageContent)
		if !ok {
			continue
		}
		mime := strings.ToLower(strings.TrimSpace(img.MIMEType))
		ext, shown := shownTypes[mime]
		if !shown || len(img.Data) == 0 {
			return nil
		}
		name := fmt.Sprintf("%s-%s-%d%s", server, tool, len(out)+1, ext)
		path := media.FilePath(m.opts.Home, turn.Conv, turn.EntryID+"-"+tools.CallID(ctx), name)
		if err := writeFile(path, img.Data); err != nil {
			m.opts.Logger.Warn("an MCP result's image could not be kept; the model reads a line instead", "mcp_server", server, "tool", tool, "err", err)
			return nil
		}
		out = append(out, chat.Image{Name: name, MIME: mime, Path: path})
	}
	return out
}

// writeFile writes data to path, its directory made first.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
