package gateway

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// Through the gateway: a reply on each platform shows as it is written,
// in one message that becomes the reply; with display.streaming off the
// reply is one plain send and nothing is edited.
func TestGatewayStreamsRepliesOnEachPlatform(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		for _, p := range adaptertest.StreamingChats(t) {
			t.Run(p.Name+"/streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
				model := testkit.NewModelServer(t)
				cfg := testConfig(t, model)
				cfg.Platforms.AllowAllUsers = true
				cfg.Display.Streaming = streaming
				p.Adapter(&cfg)
				h := startGateway(t, cfg, Options{})

				final := "Hello **there**, and more."
				gate := testkit.NewGate()
				step := testkit.Reply(final)
				if streaming {
					step.Midway = gate
				}
				model.Script(step)
				conv := p.Target.String()
				in := sessions.Inbound{Conv: conv, Sender: "u1", MessageID: p.ReplyTo, Text: "hi"}
				if err := h.g.Router().Deliver(context.Background(), in); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				if streaming {
					first := adaptertest.WaitShown(t, p, "the reply in progress", p.Render("Hello ")...)[0]
					gate.Release()
					got := adaptertest.WaitShown(t, p, "the reply in its place", p.Render(final)...)
					if got[0].ID != first.ID {
						t.Errorf("the reply is message %s, want the one in progress, %s", got[0].ID, first.ID)
					}
					if n := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_stream_calls_total", "platform="+p.Name, "call=post", "result=ok"); n != 1 {
						t.Errorf("herald_stream_calls_total of posts = %v, want 1", n)
					}
					return
				}
				adaptertest.WaitShown(t, p, "the reply", p.Render(final)...)
				if n := p.Edits(); n != 0 {
					t.Errorf("%d edits with streaming off, want none", n)
				}
				if r := model.Requests(); len(r) != 1 || r[0].Stream {
					t.Errorf("model requests %+v, want one not streamed", r)
				}
			})
		}
	}
}

// A turn whose chat has an earlier message the outbox has not sent yet
// (here held by a worker that went away, its claim not run out) shows
// nothing in progress: its reply goes through the outbox, after the
// earlier one, as a plain send.
func TestGatewayStreamsNothingWhileAnEarlierMessageIsUnsent(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Platforms.AllowAllUsers = true
			cfg.Display.Streaming = true
			p.Adapter(&cfg)
			// On Redis: a gateway alone on a SQLite file would take over
			// the claim below at once.
			cfg.Store.Backend, cfg.Store.RedisURL = config.BackendRedis, testkit.StartRedis(t).URL()

			// The earlier message is claimed by a worker that is gone
			// before the gateway starts, so none of its workers takes it.
			db, err := OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				t.Fatal(err)
			}
			earlier := outbox.Message{Target: p.Target, Conv: p.Target.String(), Kind: agent.KindReply, Text: "Earlier"}
			if _, _, err := db.Outbox().Enqueue(ctx, earlier); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			held, err := db.Outbox().Claim(ctx, "gone", []string{p.Name}, 1, time.Hour)
			if err != nil || len(held) != 1 {
				t.Fatalf("Claim = %v, %v; want the earlier message", held, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			h := startGateway(t, cfg, Options{})
			final := "Hello **there**, and more."
			gate := testkit.NewGate()
			t.Cleanup(gate.Release)
			step := testkit.Reply(final)
			step.Midway = gate
			model.Script(step)
			in := sessions.Inbound{Conv: p.Target.String(), Sender: "u1", MessageID: p.ReplyTo, Text: "hi"}
			if err := h.g.Router().Deliver(ctx, in); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			// The model has written "Hello " and waits: the driver either
			// posts it or says why it does not.
			testkit.Eventually(t, "the driver's decision on the reply in progress", func() bool {
				return len(p.Shown()) > 0 || strings.Contains(h.logs.String(), "an earlier message to the chat is not sent yet")
			})
			if got := p.Shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q while the earlier message is unsent, want nothing", got)
			}
			gate.Release()
			testkit.Eventually(t, "the reply queued behind the earlier message", func() bool {
				ms, err := h.g.Store().Outbox().Pending(ctx, 10)
				return err == nil && len(ms) == 2
			})
			if got := p.Shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q before the earlier message went, want nothing", got)
			}
			// The worker's claim is given back: the earlier message goes,
			// then the reply.
			if err := h.g.Store().Outbox().Release(ctx, held[0], time.Now(), "gone"); err != nil {
				t.Fatalf("Release: %v", err)
			}
			adaptertest.WaitShown(t, p, "the earlier message, then the reply", append(p.Render("Earlier"), p.Render(final)...)...)
			if n := p.Edits(); n != 0 {
				t.Errorf("%d edits, want none: the reply is a plain send", n)
			}
		})
	}
}
