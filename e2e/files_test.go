package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// arrivals are the texts and captions the bot's accepted sends to chat
// carried, in the order Telegram took them: a file's message arrives as
// its caption, whatever method sends it.
func arrivals(tg *telegramfake.Server, chat int64) []string {
	var out []string
	for _, c := range tg.Calls("sendMessage", "sendDocument", "sendPhoto", "sendMediaGroup") {
		if c.Status != 200 || c.Int("chat_id") != chat {
			continue
		}
		text := c.Params["text"]
		if text == "" {
			text = c.Params["caption"]
		}
		out = append(out, text)
	}
	return out
}

// TestSendFileAcrossAKillArrivesOnce kills the real binary after a turn
// that called send_file committed and before its file was delivered (an
// earlier reply to the chat is held by the platform), and restarts it on
// the same home: the file arrives once, in its place between the replies,
// and its bytes are forgotten once it was accepted. No model request
// carries the bot's token.
func TestSendFileAcrossAKillArrivesOnce(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	tg := telegramfake.New(t, "")
	model.Script(
		testkit.Reply("r1"),
		testkit.CallTools(testkit.ToolCall("send_file", `{"path": "report.csv", "caption": "the report"}`)),
		testkit.Reply("r2"),
	)
	home, workspace := t.TempDir(), t.TempDir()
	report := []byte("month,total\njan,12\n")
	if err := os.WriteFile(filepath.Join(workspace, "report.csv"), report, 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, home, fmt.Sprintf(`
store:
  lease_ttl: %s
http:
  addr: 127.0.0.1:0
display:
  streaming: false
model:
  base_url: %s
  name: %s
tools:
  workspace: %s
workers:
  turns: 4
  deliveries: 2
platforms:
  telegram:
    token: %q
    api_url: %s
    allowed_users: ["42"]
`, leaseTTL, model.URL(), modelName, workspace, tg.Token(), tg.URL()))

	first := startChild(t, "gateway", home)
	tg.WaitCalls("getUpdates", 1)
	tg.Hold("sendMessage")
	tg.Queue(telegramfake.Incoming{From: 42, Text: "m1"})
	tg.WaitHolding("sendMessage", 1)
	tg.Queue(telegramfake.Incoming{From: 42, Text: "send me the report"})
	// The second turn commits its file and its reply behind the held one.
	var blob string
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		var pending []struct {
			Kind  string
			Files []struct{ Name, Blob string }
		}
		cliJSON(t, home, &pending, "outbox", "pending")
		kinds := []string{}
		for _, m := range pending {
			kinds = append(kinds, m.Kind)
			if len(m.Files) == 1 && m.Files[0].Name == "report.csv" {
				blob = m.Files[0].Blob
			}
		}
		return slices.Equal(kinds, []string{"reply", "file", "reply"}) && blob != "",
			fmt.Sprintf("pending kinds %q, want the held reply, the file and the second reply", kinds)
	})
	first.kill()
	tg.WaitHolding("sendMessage", 0)
	tg.Release("sendMessage")
	if got := arrivals(tg, 42); len(got) != 0 {
		t.Fatalf("the chat got %q before the restart, want nothing", got)
	}

	restarted := startChild(t, "restarted gateway", home)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		got := arrivals(tg, 42)
		return len(got) >= 3, fmt.Sprintf("the chat got %q", got)
	})
	time.Sleep(2 * settleWindow)
	if got, want := arrivals(tg, 42), []string{"r1", "the report", "r2"}; !slices.Equal(got, want) {
		t.Errorf("the chat got %q, want %q: each once, the file between the replies", got, want)
	}
	var docs []telegramfake.Sent
	for _, m := range tg.Sent(42) {
		if m.Media != "" {
			docs = append(docs, m)
		}
	}
	if len(docs) != 1 || docs[0].Media != "document" || docs[0].FileName != "report.csv" || !bytes.Equal(docs[0].Data, report) {
		t.Errorf("the chat got the files %+v, want report.csv once as a document with its bytes", docs)
	}
	if n := model.Count(); n != 3 {
		t.Errorf("the model got %d requests, want 3: the turns committed before the kill ran once", n)
	}
	for _, req := range model.Requests() {
		if bytes.Contains(req.Body, []byte(tg.Token())) {
			t.Errorf("model request %d carries the bot token", req.Seq)
		}
	}
	restarted.stop()

	ctx, db := openStopped(t, home)
	wantOutboxEmpty(t, ctx, db)
	// The file's bytes were kept until it was accepted, and no longer.
	if _, err := db.Files().File(ctx, blob); !errs.Is(err, errs.NotFound) {
		t.Errorf("the store still keeps the file's bytes (%v), want them forgotten once it was accepted", err)
	}
}
