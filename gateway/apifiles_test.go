package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/heraldgw/herald/internal/testkit"
)

// The local API keeps the files a completion carries in the gateway's
// store, within attachments.max_bytes.
func TestGatewayTakesFilesWithinAttachmentsMaxBytes(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Attachments.MaxBytes = 1 << 10
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("files")
	ctx := context.Background()
	withImage := func(size int) openai.ChatCompletionNewParams {
		url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, size))
		return openai.ChatCompletionNewParams{Model: "herald", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("look"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}),
			}),
		}}
	}
	var apiErr *openai.Error
	_, err := c.Chat.Completions.New(ctx, withImage(int(cfg.Attachments.MaxBytes)+1))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(apiErr.Message, "attachments.max_bytes") {
		t.Fatalf("an image over attachments.max_bytes: %v, want 413 naming the key", err)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was called %d times for a refused request", n)
	}
	if _, err := c.Chat.Completions.New(ctx, withImage(100)); err != nil {
		t.Fatalf("an image within the limit: %v", err)
	}
}
