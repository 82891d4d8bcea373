package discordfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func post(t *testing.T, s *Server, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+APIPrefix+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bot "+s.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestScriptedFailures(t *testing.T) {
	s := New(t, Options{})
	s.FailAt(RouteMessage, 2, RateLimit(1500*time.Millisecond))
	s.FailNext(RouteMessage, 1, Forbidden(50001, "Missing Access"))
	want := []int{200, 429, 403, 200}
	for i, w := range want {
		resp := post(t, s, "/channels/1/messages", `{"content":"hi"}`)
		if resp.StatusCode != w {
			t.Errorf("send %d: status %d, want %d", i+1, resp.StatusCode, w)
		}
		if w == 429 && (resp.Header.Get("Retry-After") != "2" || resp.Header.Get("X-RateLimit-Reset-After") != "1.500") {
			t.Errorf("429 headers = %v", resp.Header)
		}
	}
	if n := len(s.Messages()); n != 2 {
		t.Errorf("%d messages recorded, want the 2 accepted", n)
	}
	if resp := post(t, s, "/channels/1/messages", `{"content":"`+strings.Repeat("x", 2001)+`"}`); resp.StatusCode != 400 {
		t.Errorf("a 2,001-character message: status %d, want 400", resp.StatusCode)
	}
}

func TestFollowupNeedsAnAnsweredInteraction(t *testing.T) {
	s := New(t, Options{})
	in := s.SendInteraction(InteractionEvent{ChannelID: "5", User: User{ID: "7"}, Name: "status"})
	if resp := post(t, s, "/webhooks/"+s.AppID()+"/"+in.Token, `{"content":"early"}`); resp.StatusCode != 404 {
		t.Errorf("follow-up before the callback: status %d, want 404", resp.StatusCode)
	}
	cb := "/interactions/" + in.ID + "/" + in.Token + "/callback"
	if resp := post(t, s, cb, `{"type":5}`); resp.StatusCode != 204 {
		t.Errorf("callback: status %d, want 204", resp.StatusCode)
	}
	if resp := post(t, s, cb, `{"type":5}`); resp.StatusCode != 400 {
		t.Errorf("second callback: status %d, want 400", resp.StatusCode)
	}
	if resp := post(t, s, "/webhooks/"+s.AppID()+"/"+in.Token, `{"content":"answer"}`); resp.StatusCode != 200 {
		t.Errorf("follow-up: status %d, want 200", resp.StatusCode)
	}
	if m := s.Messages(); len(m) != 1 || !m[0].Followup || m[0].ChannelID != "5" {
		t.Errorf("messages = %+v, want one follow-up in channel 5", m)
	}
}

// wsClient is a bare gateway client: it reads frames and sends ops.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dial(t *testing.T, s *Server) *wsClient {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.URL(), "http")+"/ws/?v=9", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &wsClient{t: t, conn: conn}
	if f := c.read(); f.Op != 10 {
		t.Fatalf("first frame op %d, want HELLO", f.Op)
	}
	return c
}

func (c *wsClient) read() frame {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var f frame
	if err := c.conn.ReadJSON(&f); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *wsClient) send(op int, d any) {
	c.t.Helper()
	if err := c.conn.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *wsClient) dispatch(t string) frame {
	c.t.Helper()
	f := c.read()
	if f.Op != 0 || f.T == nil || *f.T != t {
		c.t.Fatalf("got op %d %v, want dispatch %s", f.Op, f.T, t)
	}
	return f
}

func TestGatewayResumeReplaysMissedEvents(t *testing.T) {
	s := New(t, Options{})
	s.SendMessage(MessageEvent{ChannelID: "5", Author: User{ID: "7"}, Content: "queued before identify"})

	c := dial(t, s)
	c.send(1, 0)
	if f := c.read(); f.Op != 11 {
		t.Fatalf("heartbeat answered with op %d, want 11", f.Op)
	}
	c.send(2, map[string]any{"token": "Bot " + s.Token(), "intents": 513})
	var ready struct {
		SessionID string `json:"session_id"`
	}
	_ = json.Unmarshal(c.dispatch("READY").D, &ready)
	seen := *c.dispatch("MESSAGE_CREATE").S
	if s.Intents() != 513 || s.Identifies() != 1 {
		t.Errorf("intents %d, identifies %d", s.Intents(), s.Identifies())
	}

	// Sent, then lost with the connection before the client read it.
	s.SendMessage(MessageEvent{ChannelID: "5", Author: User{ID: "7"}, Content: "lost in flight"})
	s.DropConnection()
	s.SendMessage(MessageEvent{ChannelID: "5", Author: User{ID: "7"}, Content: "while away"})

	c = dial(t, s)
	c.send(6, map[string]any{"token": "Bot " + s.Token(), "session_id": ready.SessionID, "seq": seen})
	var got []string
	for _, typ := range []string{"MESSAGE_CREATE", "RESUMED", "MESSAGE_CREATE"} {
		f := c.dispatch(typ)
		var m struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(f.D, &m)
		if *f.S <= seen {
			t.Errorf("%s has seq %d, not after %d", typ, *f.S, seen)
		}
		seen = *f.S
		got = append(got, m.Content)
	}
	if got[0] != "lost in flight" || got[2] != "while away" {
		t.Errorf("after RESUME got %q, want the lost event replayed, then the queued one", got)
	}

	c.send(6, map[string]any{"token": "Bot " + s.Token(), "session_id": "nope", "seq": 1})
	if f := c.read(); f.Op != 9 {
		t.Errorf("RESUME of an unknown session: op %d, want 9", f.Op)
	}
}
