package telegramfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// waitLong is longer than any test waits for a poll to end by itself.
const waitLong = time.Minute

type answer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// post posts params to method in the given encoding.
func post(s *telegramfake.Server, token, method, encoding string, params map[string]string) (answer, error) {
	var body bytes.Buffer
	var ctype string
	switch encoding {
	case "json":
		_ = json.NewEncoder(&body).Encode(params)
		ctype = "application/json"
	case "form":
		v := url.Values{}
		for k, p := range params {
			v.Set(k, p)
		}
		body.WriteString(v.Encode())
		ctype = "application/x-www-form-urlencoded"
	default:
		w := multipart.NewWriter(&body)
		for k, p := range params {
			_ = w.WriteField(k, p)
		}
		_ = w.Close()
		ctype = w.FormDataContentType()
	}
	resp, err := http.Post(s.URL()+"/bot"+token+"/"+method, ctype, &body)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	return a, json.NewDecoder(resp.Body).Decode(&a)
}

func call(t *testing.T, s *telegramfake.Server, token, method, encoding string, params map[string]string) answer {
	t.Helper()
	a, err := post(s, token, method, encoding, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return a
}

func TestParametersInEveryEncoding(t *testing.T) {
	s := telegramfake.New(t, "")
	for _, enc := range []string{"multipart", "json", "form"} {
		a := call(t, s, s.Token(), "sendMessage", enc, map[string]string{"chat_id": "42", "text": "hi " + enc})
		if !a.OK {
			t.Errorf("%s: %s", enc, a.Description)
		}
	}
	sent := s.Sent(42)
	if len(sent) != 3 || sent[2].Text != "hi form" || sent[0].ID != 1 || sent[2].ID != 3 {
		t.Errorf("sent %+v", sent)
	}
	if a := call(t, s, "1:wrong", "getMe", "json", nil); a.OK || a.ErrorCode != 401 {
		t.Errorf("wrong token: %+v", a)
	}
}

func TestScriptedFailures(t *testing.T) {
	s := telegramfake.New(t, "")
	s.Fail("sendMessage", 1, telegramfake.Pass)
	s.Fail("sendMessage", 1, telegramfake.TooManyRequests(3))
	msg := map[string]string{"chat_id": "42", "text": "x"}
	if a := call(t, s, s.Token(), "sendMessage", "json", msg); !a.OK {
		t.Errorf("first call: %+v", a)
	}
	if a := call(t, s, s.Token(), "sendMessage", "json", msg); a.ErrorCode != 429 || a.Parameters.RetryAfter != 3 {
		t.Errorf("second call: %+v", a)
	}
	s.RejectFormatted(1)
	html := map[string]string{"chat_id": "42", "text": "<b>x</b>", "parse_mode": "HTML"}
	if a := call(t, s, s.Token(), "sendMessage", "json", html); a.ErrorCode != 400 || !strings.Contains(a.Description, "can't parse entities") {
		t.Errorf("rejected formatting: %+v", a)
	}
	if a := call(t, s, s.Token(), "sendMessage", "json", html); !a.OK {
		t.Errorf("formatting after the rejection: %+v", a)
	}
	bad := map[string]string{"chat_id": "42", "text": "<b>x</i>", "parse_mode": "HTML"}
	if a := call(t, s, s.Token(), "sendMessage", "json", bad); a.ErrorCode != 400 {
		t.Errorf("crossed tags accepted: %+v", a)
	}
}

// A held call waits unanswered until Release and is then done; one
// whose caller gives up first is dropped, sending nothing.
func TestHeldCallsWaitUntilReleased(t *testing.T) {
	s := telegramfake.New(t, "")
	s.Hold("sendMessage")
	if a := call(t, s, s.Token(), "getMe", "json", nil); !a.OK {
		t.Errorf("getMe while sendMessage is held: %+v", a)
	}

	// A caller that gives up.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		body := strings.NewReader(`{"chat_id":"42","text":"abandoned"}`)
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/bot"+s.Token()+"/sendMessage", body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gaveUp <- err
	}()
	s.WaitHolding("sendMessage", 1)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Error("the abandoned call was answered")
	}
	s.WaitHolding("sendMessage", 0)

	// A caller that waits.
	answered := make(chan answer, 1)
	go func() {
		a, _ := post(s, s.Token(), "sendMessage", "json", map[string]string{"chat_id": "42", "text": "kept"})
		answered <- a
	}()
	s.WaitHolding("sendMessage", 1)
	if sent := s.Sent(42); len(sent) != 0 {
		t.Errorf("sent while held: %+v", sent)
	}
	s.Release("sendMessage")
	if a := <-answered; !a.OK {
		t.Errorf("the held call after Release: %+v", a)
	}
	if sent := s.Sent(42); len(sent) != 1 || sent[0].Text != "kept" {
		t.Errorf("sent %+v, want only the call that waited", sent)
	}
	if calls := s.Calls("sendMessage"); len(calls) != 1 {
		t.Errorf("%d sendMessage calls recorded, want the one answered", len(calls))
	}
}

// A second poller ends the first one's wait with 409, as Telegram does,
// and the counters show it.
func TestSecondPollerConflicts(t *testing.T) {
	s := telegramfake.New(t, "")
	s.SetMaxPoll(waitLong)
	first := make(chan answer, 1)
	go func() {
		a, _ := post(s, s.Token(), "getUpdates", "json", map[string]string{"timeout": "30"})
		first <- a
	}()
	s.WaitPollsInFlight(1)
	if a := call(t, s, s.Token(), "getUpdates", "json", map[string]string{"timeout": "0"}); !a.OK {
		t.Errorf("second poller: %+v", a)
	}
	if a := <-first; a.ErrorCode != 409 {
		t.Errorf("first poller: %+v, want 409", a)
	}
	if s.Conflicts() != 1 || s.MaxConcurrentPolls() != 2 {
		t.Errorf("conflicts %d, max polls %d; want 1 and 2", s.Conflicts(), s.MaxConcurrentPolls())
	}
}

func TestUpdatesAreServedUntilConfirmed(t *testing.T) {
	s := telegramfake.New(t, "")
	u1 := s.Queue(telegramfake.Incoming{From: 42, Text: "/new@" + s.BotName() + " now"})
	u2 := s.Queue(telegramfake.Incoming{Chat: -100, Thread: 3, From: 42, Text: "hi @" + s.BotName()})

	a := call(t, s, s.Token(), "getUpdates", "json", map[string]string{"offset": "0", "timeout": "0"})
	var got []struct {
		UpdateID int64 `json:"update_id"`
		Message  struct {
			MessageThreadID int `json:"message_thread_id"`
			Entities        []struct {
				Type   string `json:"type"`
				Offset int    `json:"offset"`
				Length int    `json:"length"`
			} `json:"entities"`
		} `json:"message"`
	}
	if err := json.Unmarshal(a.Result, &got); err != nil || len(got) != 2 {
		t.Fatalf("getUpdates: %s %v", a.Result, err)
	}
	if e := got[0].Message.Entities; len(e) != 1 || e[0].Type != "bot_command" || e[0].Length != len("/new@"+s.BotName()) {
		t.Errorf("command entities %+v", e)
	}
	if e := got[1].Message.Entities; len(e) != 1 || e[0].Type != "mention" || e[0].Offset != 3 || got[1].Message.MessageThreadID != 3 {
		t.Errorf("mention %+v in thread %d", e, got[1].Message.MessageThreadID)
	}
	call(t, s, s.Token(), "getUpdates", "json", map[string]string{"offset": "0", "timeout": "0"})
	if s.Served(u1.ID) != 2 || s.Confirmed() != 0 {
		t.Errorf("served %d times, confirmed %d: an update must be served until an offset passes it", s.Served(u1.ID), s.Confirmed())
	}
	call(t, s, s.Token(), "getUpdates", "json", map[string]string{"offset": strconv.FormatInt(u2.ID, 10), "timeout": "0"})
	if ids := s.Unconfirmed(); len(ids) != 1 || ids[0] != u2.ID {
		t.Errorf("unconfirmed %v, want only %d", ids, u2.ID)
	}
}
