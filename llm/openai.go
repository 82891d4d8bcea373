package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Defaults for OpenAIOptions.
const (
	DefaultTimeout      = 5 * time.Minute
	DefaultMaxRetries   = 3
	DefaultMaxRetryWait = time.Minute
	firstBackoff        = 500 * time.Millisecond
	maxBackoff          = 8 * time.Second
)

// OpenAIOptions configure an OpenAI-compatible Chat Completions client.
type OpenAIOptions struct {
	BaseURL string // e.g. http://127.0.0.1:11434/v1
	APIKey  string // sent as a bearer token; may be empty for local servers
	Model   string // used when a Request names none

	// Timeout bounds one attempt: a whole non-streamed call, or for a
	// streamed call the wait for each chunk, so a long answer that keeps
	// arriving is never cut. 0 means DefaultTimeout; negative means none.
	Timeout time.Duration

	// MaxRetries is how many times a failed call is retried when a retry
	// can help (timeouts, 5xx, connection errors, 429). 0 means
	// DefaultMaxRetries; negative means no retries.
	MaxRetries int

	// Backoff is the wait before retry number attempt (1, 2, …). The
	// default grows from 500ms, doubling, capped at 8s, with jitter.
	Backoff func(attempt int) time.Duration

	// MaxRetryWait bounds how long a Retry-After is honoured: a server
	// asking for more ends the retries at once. 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration

	// Sleep waits between attempts; it returns early with ctx's error.
	// The default waits on a real timer.
	Sleep func(ctx context.Context, d time.Duration) error

	// Clock reads the time a Retry-After date is measured against.
	Clock clock.Clock

	HTTPClient *http.Client // default: a client without a timeout of its own

	// MaxTokens bounds a reply, in tokens, where the API requires a bound
	// (Anthropic's Messages: DefaultMaxTokens when 0); Chat Completions
	// requests leave it to the server.
	MaxTokens int

	// RequestOverrides are fields set in the body of every request, over
	// what herald puts there (temperature, reasoning_effort, …); the
	// config refuses those herald must decide (model, messages, tools,
	// stream).
	RequestOverrides map[string]any

	// Pool, when set, gives the key of each request (APIKey is then not
	// used) and acts on the failures the server blames on a key: see
	// Pool. Several clients may share one pool.
	Pool *Pool
}

// OpenAI is a Client for an OpenAI-compatible Chat Completions endpoint.
type OpenAI struct {
	opts OpenAIOptions
	host string
	svc  openai.ChatCompletionService
}

var _ Client = (*OpenAI)(nil)

// NewOpenAI returns a client for opts.BaseURL. An empty BaseURL or Model
// is not an error here: Complete then answers ClassNotConfigured, so a
// gateway without a model still starts and tells its users how to set one.
// Errors: errs.Invalid for a BaseURL that is not an http(s) URL.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	const op = "llm.NewOpenAI"
	opts = opts.withDefaults()
	c := &OpenAI{opts: opts}
	if opts.BaseURL == "" {
		return c, nil
	}
	host, err := modelHost(op, opts.BaseURL)
	if err != nil {
		return nil, err
	}
	c.host = host
	// The service is built directly rather than through openai.NewClient,
	// which would also read OPENAI_* variables from the environment; herald's
	// config decides the endpoint and key, nothing else.
	svcOpts := []option.RequestOption{
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithHTTPClient(opts.HTTPClient),
		option.WithMaxRetries(0), // retries are Complete's, bounded and testable
	}
	for _, k := range slices.Sorted(maps.Keys(opts.RequestOverrides)) {
		svcOpts = append(svcOpts, option.WithJSONSet(k, opts.RequestOverrides[k]))
	}
	c.svc = openai.NewChatCompletionService(svcOpts...)
	return c, nil
}

// modelHost is the host of a model's base URL, for errors and logs.
// Errors: Invalid for a URL that is not http(s).
func modelHost(op, baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is left out of the message: it may carry credentials.
		return "", errs.E(op, errs.Invalid, "model base URL is not an http(s) URL")
	}
	return u.Host, nil
}

// withDefaults is opts with what it leaves unset filled in.
func (opts OpenAIOptions) withDefaults() OpenAIOptions {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = DefaultMaxRetries
	}
	if opts.MaxRetries < 0 {
		opts.MaxRetries = 0
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxRetryWait <= 0 {
		opts.MaxRetryWait = DefaultMaxRetryWait
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	return opts
}

// DefaultBackoff waits 500ms before the first retry and doubles up to 8s,
// each wait drawn between half and all of that so workers that failed
// together do not retry together.
func DefaultBackoff(attempt int) time.Duration {
	d := maxBackoff
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 5 {
		d = min(firstBackoff<<(attempt-1), maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if !clock.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// Complete makes the call, retrying timeouts, 5xx, connection errors and
// 429 up to MaxRetries times. A streamed call is not retried once content
// reached req.Stream.
func (c *OpenAI) Complete(ctx context.Context, req Request) (*Response, error) {
	model := req.Model
	if model == "" {
		model = c.opts.Model
	}
	if model == "" || c.opts.BaseURL == "" {
		return nil, fail(&Error{Class: ClassNotConfigured, Model: model})
	}
	params, err := buildParams(model, req)
	if err != nil {
		return nil, fail(&Error{Class: ClassBadRequest, Model: model, Host: c.host, Err: scrubErr(err, c.opts.APIKey)})
	}
	return c.opts.retries().run(ctx, call{model: model, host: c.host, conv: req.User, attempt: func(key string) (*Response, bool, *Error) {
		return c.attempt(ctx, params, req.Stream, key)
	}})
}

func (opts OpenAIOptions) retries() retryPolicy {
	return retryPolicy{max: opts.MaxRetries, backoff: opts.Backoff, maxWait: opts.MaxRetryWait, sleep: opts.Sleep, key: opts.APIKey, pool: opts.Pool}
}

// retryPolicy is when, and after how long, a client calls again, and
// with which key.
type retryPolicy struct {
	max     int
	backoff func(attempt int) time.Duration
	maxWait time.Duration
	sleep   func(ctx context.Context, d time.Duration) error
	key     string // the key when there is no pool
	pool    *Pool  // nil: key is the only one
}

// call is one request as the retry loop sees it.
type call struct {
	model, host string
	conv        string // the conversation, for the pool's sticky key; may be ""
	// attempt makes one try with key; streamed says content already
	// went to the caller.
	attempt func(key string) (resp *Response, streamed bool, e *Error)
}

// run calls attempt until it succeeds, its failure is not one a retry
// can help, content was already streamed, or the retries ran out;
// waiting the backoff, or the server's Retry-After when it asks for one
// within maxWait, between attempts. With a pool, each failure is acted
// on by its class (Pool.failed): a key the failure is blamed on is left
// for another, which is not a retry, until the pool has none to offer.
func (p retryPolicy) run(ctx context.Context, c call) (*Response, error) {
	var (
		k       *poolKey
		limited int // 429s on k in this request
		retries int
		tried   map[string]bool
		last    *Error // the failure that made the request leave its last key
	)
	for n := 1; ; n++ {
		key := p.key
		if p.pool != nil {
			if k == nil {
				var e *Error
				if k, e = p.pool.pick(ctx, c.conv, tried, last); e != nil {
					e.Model, e.Host, e.Attempts, e.Setting = c.model, c.host, n-1, p.pool.setting
					return nil, fail(e)
				}
				limited = 0
			}
			key = k.secret
		}
		resp, streamed, e := c.attempt(key)
		if e == nil {
			return resp, nil
		}
		e.Model, e.Host, e.Attempts = c.model, c.host, n
		if p.pool != nil {
			e.Setting = p.pool.setting
		}
		if streamed {
			return nil, fail(e)
		}
		canRetry := retries < p.max
		act := keyFail
		switch {
		case p.pool != nil:
			act = p.pool.failed(ctx, k, e, &limited, canRetry, p.maxWait)
		case e.Class.retryable() && canRetry && e.RetryAfter <= p.maxWait:
			act = keyRetry
		}
		switch act {
		case keyFail:
			return nil, fail(e)
		case keyRotate:
			if tried == nil {
				tried = map[string]bool{}
			}
			tried[k.id], k, last = true, nil, e
			continue
		}
		retries++
		wait := p.backoff(retries)
		if e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		if err := p.sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fail(&Error{Class: ClassCanceled, Model: c.model, Host: c.host, Attempts: n, Err: scrubErr(err, key)})
		}
	}
}

// errAttemptTimeout is the cause an attempt's context is cancelled with
// when the attempt ran out of time.
var errAttemptTimeout = errors.New("attempt timed out")

// attemptContext is the context of one attempt: it ends with ctx, or
// with errAttemptTimeout when timer (nil for no timeout) fires first. A
// streamed attempt resets the timer at each piece. done releases both.
func attemptContext(ctx context.Context, timeout time.Duration) (actx context.Context, timer *time.Timer, done func()) {
	actx, cancel := context.WithCancelCause(ctx)
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { cancel(errAttemptTimeout) })
	}
	return actx, timer, func() {
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
	}
}

// attempt makes one request. streamed reports whether content already
// went to the caller's Stream func.
func (c *OpenAI) attempt(ctx context.Context, params openai.ChatCompletionNewParams, stream func(string), key string) (resp *Response, streamed bool, e *Error) {
	actx, timer, done := attemptContext(ctx, c.opts.Timeout)
	defer done()

	var httpRes *http.Response
	var err error
	opts := []option.RequestOption{option.WithResponseInto(&httpRes)}
	if c.opts.Pool != nil {
		opts = append(opts, option.WithAPIKey(key))
	}
	if stream == nil {
		var completion *openai.ChatCompletion
		completion, err = c.svc.New(actx, params, opts...)
		if err == nil {
			resp, err = replyFrom(completion)
		}
	} else {
		resp, streamed, err = c.stream(actx, params, stream, timer, opts)
	}
	if err == nil {
		return resp, false, nil
	}
	return nil, streamed, c.classify(ctx, actx, err, httpRes, key)
}

func (c *OpenAI) stream(ctx context.Context, params openai.ChatCompletionNewParams, deliver func(string), timer *time.Timer, opts []option.RequestOption) (*Response, bool, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.svc.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var acc streamAccumulator
	for s.Next() {
		// The clock is stopped while the caller handles a delta: a slow
		// receiver (a platform edit) is not the model being slow.
		if timer != nil {
			timer.Stop()
		}
		delta, err := acc.add(s.Current())
		if err != nil {
			return nil, acc.streamed, err
		}
		if delta != "" {
			acc.streamed = true
			deliver(delta)
		}
		if timer != nil {
			timer.Reset(c.opts.Timeout)
		}
	}
	if err := s.Err(); err != nil {
		return nil, acc.streamed, err
	}
	resp, err := acc.response()
	return resp, acc.streamed, err
}

// classify turns a failed attempt into an *Error. ctx is the caller's,
// actx the attempt's; httpRes is the response when one arrived.
func (c *OpenAI) classify(ctx, actx context.Context, err error, httpRes *http.Response, key string) *Error {
	if e := classifyHTTP(ctx, actx, httpRes, key, c.opts.Timeout, c.opts.Clock.Now()); e != nil {
		return e
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		// The server reported an error inside a stream it had started.
		return &Error{Class: ClassUnavailable, Message: scrub(streamErr.Message, key)}
	}
	return unreachable(err, key)
}

// classifyHTTP reads a failed attempt's context and response, whichever
// API it spoke: nil when neither says what went wrong. ctx is the
// caller's, actx the attempt's.
func classifyHTTP(ctx, actx context.Context, httpRes *http.Response, key string, timeout time.Duration, now time.Time) *Error {
	switch {
	case ctx.Err() != nil:
		return &Error{Class: ClassCanceled, Err: ctx.Err()}
	case errors.Is(context.Cause(actx), errAttemptTimeout):
		return &Error{Class: ClassTimeout, Timeout: timeout}
	case httpRes != nil && httpRes.StatusCode >= 400:
		body := readErrorBody(httpRes.Body)
		e := &Error{Class: classifyStatus(httpRes.StatusCode, body.code), Status: httpRes.StatusCode, Message: scrub(body.message, key)}
		if e.Class == ClassBadRequest && overflowMessage(body.message) {
			e.Class = ClassContextOverflow
		}
		if e.Class.retryable() {
			e.RetryAfter = retryAfter(httpRes.Header, now)
		}
		keyFacts(e, body, httpRes.Header, now)
		return e
	}
	return nil
}

// keyFacts reads what a failed answer says about the key it was sent
// with: an answer about billing or spent credit is ClassPayment, whatever
// its status; a 429 saying a usage limit is reached spent a quota
// (QuotaSpent); a 403 about the model, a permission or the caller's
// region is no fault of the key; a 401 about the key itself revoked it;
// and when the key's limit resets (ResetAt, ResetIn).
func keyFacts(e *Error, body errBody, h http.Header, now time.Time) {
	msg := strings.ToLower(body.message)
	switch {
	case e.Status == http.StatusTooManyRequests && (strings.Contains(msg, "usage limit") || strings.Contains(body.code, "usage_limit")):
		e.QuotaSpent = true
	case billingAnswer(e.Status, body, msg):
		e.Class = ClassPayment
	case e.Status == http.StatusForbidden:
		e.Class = forbiddenClass(body, msg)
	case e.Status == http.StatusUnauthorized &&
		(body.code == "invalid_api_key" || containsAny(msg, "revoked", "invalid api key", "incorrect api key", "invalid x-api-key", "deactivated", "disabled")):
		e.Revoked = true
	}
	switch {
	case e.Class == ClassPayment || e.QuotaSpent:
		// The rate limit reset headers come with every answer and speak of
		// the request and token windows, not of when credit or a spent
		// quota is back: only the body or Retry-After says that.
		e.ResetAt, e.ResetIn = body.reset()
		if e.ResetAt.IsZero() && e.ResetIn == 0 {
			e.ResetIn = retryAfter(h, now)
		}
	case e.Class == ClassRateLimited:
		e.ResetAt, e.ResetIn = headerReset(h, now)
	}
}

// billingCodes are the error codes and types that say the account is out
// of credit or over its spending limit (OpenAI's codes, Anthropic's type).
var billingCodes = []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "billing_error"}

// billingPhrases are how servers word the same: OpenAI's spent quota and
// hard limit, Anthropic's credit balance (sent as a 400).
var billingPhrases = []string{"exceeded your current quota", "credit balance is too low", "billing hard limit"}

// billingAnswer reports whether a 400, 403 or 429 is about billing: by
// its code or type, else by a phrase only billing answers use. Words
// alone ("billing", "payment") are not enough: OpenAI's ordinary rate
// limit message points at the billing page.
func billingAnswer(status int, body errBody, msg string) bool {
	switch status {
	case http.StatusBadRequest, http.StatusForbidden, http.StatusTooManyRequests:
	default:
		return false
	}
	return slices.Contains(billingCodes, body.code) || slices.Contains(billingCodes, body.typ) || containsAny(msg, billingPhrases...)
}

// forbiddenClass classes a 403 that is not about billing: about the model
// (access to it denied) ClassModelNotFound, about a permission or the
// caller's country or region ClassBadRequest, since another key of the
// account fares no better; else ClassAuth, the key refused.
func forbiddenClass(body errBody, msg string) Class {
	switch {
	case strings.Contains(msg, "model") || strings.Contains(body.code, "model"):
		return ClassModelNotFound
	case body.typ == "permission_error" || strings.Contains(body.code, "country") ||
		containsAny(msg, "permission", "country", "region", "territory"):
		return ClassBadRequest
	}
	return ClassAuth
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// reset is when the error's body says the limit resets: resets_at (Unix
// seconds) as a time, or resets_in_seconds as a wait.
func (b errBody) reset() (time.Time, time.Duration) {
	switch {
	case b.resetsAt > 0:
		return time.Unix(int64(b.resetsAt), 0), 0
	case b.resetsIn > 0:
		return time.Time{}, time.Duration(min(b.resetsIn, maxRetryAfter.Seconds()) * float64(time.Second))
	}
	return time.Time{}, 0
}

// headerReset is when the last of a rate limit's windows resets, by the
// reset headers providers send (Anthropic's anthropic-ratelimit-*-reset
// as RFC 3339, OpenAI's x-ratelimit-reset-* as a wait like "6m0s", or
// x-ratelimit-reset in Unix seconds): a time, or a wait, whichever form
// the latest came in; now (the client's clock) only orders the two
// forms. Zero when none says.
func headerReset(h http.Header, now time.Time) (time.Time, time.Duration) {
	var (
		latest time.Time
		at     time.Time
		in     time.Duration
	)
	for name, vs := range h {
		name = strings.ToLower(name)
		if len(vs) == 0 || !strings.Contains(name, "reset") {
			continue
		}
		v := strings.TrimSpace(vs[0])
		var (
			t    time.Time
			wait time.Duration
		)
		if ts, err := time.Parse(time.RFC3339, v); err == nil {
			t = ts
		} else if d, err := time.ParseDuration(v); err == nil && d > 0 {
			wait = min(d, maxRetryAfter)
			t = now.Add(wait)
		} else if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 1_000_000_000 {
			t = time.Unix(n, 0)
		}
		if t.After(latest) && t.Before(now.Add(31*24*time.Hour)) {
			latest = t
			if wait > 0 {
				at, in = time.Time{}, wait
			} else {
				at, in = t, 0
			}
		}
	}
	return at, in
}

// unreachable is the failure of a call that got no error response:
// connection errors, a reply that is not the JSON it should be, or a
// stream cut short: the server or the path to it is at fault.
func unreachable(err error, key string) *Error {
	return &Error{Class: ClassUnavailable, Err: scrubErr(err, key)}
}

// classifyStatus maps an HTTP error status (and the error code in the
// body, which is more precise where servers send one) to a Class.
func classifyStatus(status int, code string) Class {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ClassAuth
	case status == http.StatusPaymentRequired, code == "insufficient_quota":
		return ClassPayment
	case status == http.StatusNotFound, code == "model_not_found":
		return ClassModelNotFound
	case status == http.StatusRequestEntityTooLarge, code == "context_length_exceeded":
		return ClassContextOverflow
	case status == http.StatusTooManyRequests:
		return ClassRateLimited
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status >= 500:
		// OpenAI documents 408 and 409 as worth retrying, like any 5xx.
		return ClassUnavailable
	}
	return ClassBadRequest
}

// overflowMessage reports whether a 400's message says the request is
// longer than the model takes, as servers word it (OpenAI's "maximum
// context length", Anthropic's "prompt is too long", local servers'
// "context length", "context window").
func overflowMessage(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"context length", "context window", "prompt is too long", "too many tokens", "maximum context"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// errBody is what an error response says.
type errBody struct {
	message, code string
	typ           string  // the error's type (Anthropic's billing_error, say)
	resetsAt      float64 // Unix seconds, when the body names a reset time
	resetsIn      float64 // seconds, when the body names a wait
}

// readErrorBody reads an error response: OpenAI's {"error": {"message",
// "code"}} (with a reset time where a usage limit sends one), the
// {"error": "text"} some local servers send, or plain text.
func readErrorBody(body io.Reader) errBody {
	if body == nil {
		return errBody{}
	}
	raw, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var wrapped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Error) > 0 {
		var obj struct {
			Message  string  `json:"message"`
			Code     any     `json:"code"` // a string, a number or null, depending on the server
			Type     string  `json:"type"`
			ResetsAt float64 `json:"resets_at"`
			ResetsIn float64 `json:"resets_in_seconds"`
		}
		if json.Unmarshal(wrapped.Error, &obj) == nil {
			b := errBody{message: obj.Message, typ: obj.Type, resetsAt: obj.ResetsAt, resetsIn: obj.ResetsIn}
			if obj.Code != nil {
				b.code = fmt.Sprint(obj.Code)
			}
			if b.code == "" && obj.Type == "usage_limit_reached" {
				b.code = obj.Type
			}
			return b
		}
		var text string
		if json.Unmarshal(wrapped.Error, &text) == nil {
			return errBody{message: text}
		}
	}
	if json.Valid(raw) {
		return errBody{} // some other JSON shape: nothing a person should read
	}
	return errBody{message: strings.TrimSpace(string(raw))}
}

// maxRetryAfter bounds a parsed Retry-After so the conversion to a
// Duration cannot overflow; anything this long is refused anyway.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads how long the server asked to wait: OpenAI's
// retry-after-ms, else Retry-After in seconds or as an HTTP date. 0 when
// the server did not say.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return min(time.Duration(min(ms, float64(maxRetryAfter.Milliseconds()))*float64(time.Millisecond)), maxRetryAfter)
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsNaN(s) {
			return 0
		}
		return min(time.Duration(min(s, maxRetryAfter.Seconds())*float64(time.Second)), maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}
