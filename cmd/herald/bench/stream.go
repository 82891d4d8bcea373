package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/llm"
)

// Defaults for StreamOptions.
const (
	DefaultStreams        = 1
	DefaultStreamPieces   = 40
	DefaultStreamInterval = 10 * time.Millisecond
	DefaultStreamRounds   = 3
)

// StreamOptions configure Stream.
type StreamOptions struct {
	Store    string // "sqlite" or "redis"
	Streams  int    // completions streaming at once; DefaultStreams when 0
	Pieces   int    // pieces the model writes a reply in; DefaultStreamPieces when 0
	Interval time.Duration
	// Rounds is how many replies each stream takes, herald's and the
	// raw server's in turn; DefaultStreamRounds when 0.
	Rounds   int
	RedisURL string
	TempDir  string
}

// StreamResult is one run's figures: the time from the model handing
// herald a piece of its reply to the client reading it as a chunk, and
// the same for a bare server that writes each piece to its stream the
// moment it is made (the ceiling: the client, loopback HTTP and SSE).
type StreamResult struct {
	Store    string  `json:"store"`
	Streams  int     `json:"streams"`
	Pieces   int     `json:"pieces"`
	Samples  int     `json:"samples"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	RawP50Ms float64 `json:"raw_p50_ms"`
	RawP99Ms float64 `json:"raw_p99_ms"`
}

// Stream measures streamed completions through the local API.
func Stream(ctx context.Context, opt StreamOptions) (StreamResult, error) {
	opt.Streams = max(opt.Streams, DefaultStreams)
	if opt.Pieces <= 0 {
		opt.Pieces = DefaultStreamPieces
	}
	if opt.Interval <= 0 {
		opt.Interval = DefaultStreamInterval
	}
	if opt.Rounds <= 0 {
		opt.Rounds = DefaultStreamRounds
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, opt.Streams, func(b backend) (StreamResult, error) {
		return measureStream(ctx, b, opt)
	})
}

// pieceClock remembers when each piece was made, by its text (which
// names its stream, round and place, so it is unique in the run).
type pieceClock struct{ made sync.Map }

func (c *pieceClock) mark(text string) { c.made.Store(text, time.Now()) }

func (c *pieceClock) since(text string) (time.Duration, bool) {
	v, ok := c.made.Load(text)
	if !ok {
		return 0, false
	}
	return time.Since(v.(time.Time)), true
}

// pieces writes a reply for key in n pieces, interval apart, marking
// each as made just before it is handed on.
func pieces(ctx context.Context, clk *pieceClock, key string, n int, interval time.Duration, hand func(string) error) (string, error) {
	var all strings.Builder
	for i := range n {
		text := fmt.Sprintf("[%s.%d] ", key, i)
		clk.mark(text)
		if err := hand(text); err != nil {
			return "", err
		}
		all.WriteString(text)
		select {
		case <-time.After(interval):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return all.String(), nil
}

// streamModel is a model that streams its reply in pieces.
type streamModel struct {
	clk      *pieceClock
	n        int
	interval time.Duration
}

func (m *streamModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	key := req.Messages[len(req.Messages)-1].Content
	hand := func(text string) error {
		if req.Stream != nil {
			req.Stream(text)
		}
		return nil
	}
	text, err := pieces(ctx, m.clk, key, m.n, m.interval, hand)
	if err != nil {
		return nil, err
	}
	return &llm.Response{Message: chat.Message{Role: "assistant", Content: text}, FinishReason: "stop"}, nil
}

// rawStream is the ceiling: a server that writes each piece to the
// stream as a chunk the moment it is made.
func rawStream(clk *pieceClock, n int, interval time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = pieces(r.Context(), clk, req.Messages[len(req.Messages)-1].Content, n, interval, func(text string) error {
			b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk", "choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": text}}}})
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return err
			}
			return rc.Flush()
		})
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
}

// readStream posts a streamed completion of key to base and returns the
// time from each piece's making to its chunk's reading.
func readStream(ctx context.Context, client *http.Client, base, conv, key string, clk *pieceClock) ([]time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"model": "herald", "stream": true, "messages": []map[string]string{{"role": "user", "content": key}}})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Herald-Conversation", conv)
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		return nil, fmt.Errorf("stream answered %d: %s", res.StatusCode, b)
	}
	var out []time.Duration
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &c) != nil || len(c.Choices) == 0 {
			continue
		}
		if d, ok := clk.since(c.Choices[0].Delta.Content); ok {
			out = append(out, d)
		}
	}
	return out, sc.Err()
}

// measureStream starts the gateway on b's store and runs Rounds replies
// on each of Streams streams, herald's and the raw server's in turn.
func measureStream(ctx context.Context, b backend, opt StreamOptions) (StreamResult, error) {
	res := StreamResult{Store: opt.Store, Streams: opt.Streams, Pieces: opt.Pieces}
	clk := &pieceClock{}
	// The gateway's API: the router, the turn worker running the agent
	// on the model, the store, and the delivery worker that puts the
	// reply in the timeline.
	h, err := startGateway(ctx, b, gatewaySetup{
		model:     &streamModel{clk: clk, n: opt.Pieces, interval: opt.Interval},
		logger:    slog.New(slog.DiscardHandler),
		tempDir:   opt.TempDir,
		configure: func(cfg *config.Config) { cfg.Workers.Turns = opt.Streams },
	})
	if err != nil {
		return res, err
	}
	defer func() { _ = h.stop(ctx) }()
	base := "http://" + h.Addr()
	raw := rawStream(clk, opt.Pieces, opt.Interval)
	defer raw.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opt.Streams}}
	var herald, bare []time.Duration
	for round := range opt.Rounds {
		for _, side := range []struct {
			base, key, name string
			into            *[]time.Duration
		}{{base, "h", "herald's", &herald}, {raw.URL, "r", "the raw", &bare}} {
			got, err := streamsAtOnce(ctx, client, side.base, side.key, round, opt.Streams, clk)
			if err != nil {
				return res, fmt.Errorf("%s streams: %w", side.name, err)
			}
			*side.into = append(*side.into, got...)
		}
	}
	if want := opt.Rounds * opt.Streams * opt.Pieces; len(herald) != want {
		return res, fmt.Errorf("herald's streams gave %d of %d pieces", len(herald), want)
	}
	slices.Sort(herald)
	slices.Sort(bare)
	res.Samples = len(herald)
	res.P50Ms, res.P99Ms = ms(percentile(herald, 50)), ms(percentile(herald, 99))
	res.RawP50Ms, res.RawP99Ms = ms(percentile(bare, 50)), ms(percentile(bare, 99))
	return res, nil
}

// streamsAtOnce runs n streams on base at once, each its own
// conversation, and returns their pieces' times.
func streamsAtOnce(ctx context.Context, client *http.Client, base, side string, round, n int, clk *pieceClock) ([]time.Duration, error) {
	parts := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("%s%d-%d", side, round, i)
			parts[i], errs[i] = readStream(ctx, client, base, fmt.Sprintf("s%d", i), key, clk)
		})
	}
	wg.Wait()
	return merge(parts), errors.Join(errs...)
}
