package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Class says why a model call failed, finer than an errs.Code: callers
// decide on it whether to retry, tell the user, or stop.
type Class string

const (
	// ClassNotConfigured: no model name is configured.
	ClassNotConfigured Class = "not_configured"
	// ClassAuth: the API key was missing, rejected (401) or refused (a
	// 403 not about billing, the model, a permission or a region).
	ClassAuth Class = "auth"
	// ClassPayment: the account needs payment or credit (402, or a 400,
	// 403 or 429 whose code, type or wording says so).
	ClassPayment Class = "payment"
	// ClassModelNotFound: the server does not know the model, or (403)
	// denies access to it.
	ClassModelNotFound Class = "model_not_found"
	// ClassBadRequest: the server refused the request as malformed (400
	// and other 4xx), or herald could not build it.
	ClassBadRequest Class = "bad_request"
	// ClassContextOverflow: the request is longer than the model takes
	// (413, or a 400 that says so); the caller may send less.
	ClassContextOverflow Class = "context_overflow"
	// ClassRateLimited: 429, still limited after the retries, or asked to
	// wait longer than the client waits.
	ClassRateLimited Class = "rate_limited"
	// ClassTimeout: no answer within the client's timeout, on every attempt.
	ClassTimeout Class = "timeout"
	// ClassUnavailable: 5xx, connection failures or unreadable replies, on
	// every attempt.
	ClassUnavailable Class = "unavailable"
	// ClassCanceled: the caller's context ended.
	ClassCanceled Class = "canceled"
)

// code is the errs.Code each class is reported under.
func (c Class) code() errs.Code {
	switch c {
	case ClassModelNotFound:
		return errs.NotFound
	case ClassRateLimited, ClassTimeout, ClassUnavailable:
		return errs.Unavailable
	case ClassCanceled:
		return errs.Closed
	case ClassNotConfigured, ClassAuth, ClassPayment, ClassBadRequest, ClassContextOverflow:
		return errs.Invalid
	}
	return errs.Internal
}

// retryable reports whether another attempt may succeed.
func (c Class) retryable() bool {
	return c == ClassRateLimited || c == ClassTimeout || c == ClassUnavailable
}

// Error is a failed model call. It sits inside an *errs.Error, so both
// errs.CodeOf and ClassOf read it. Nothing in it holds the API key or the
// request: the server's message and any cause are scrubbed of the key.
type Error struct {
	Class      Class
	Model      string
	Host       string        // the model server's host, for the user message
	Status     int           // HTTP status of the last attempt; 0 when there was none
	Message    string        // the server's error message, scrubbed and shortened
	Attempts   int           // requests made
	RetryAfter time.Duration // how long the server asked to wait, when it did
	Timeout    time.Duration // the per-attempt limit, for ClassTimeout
	Err        error         // the underlying cause, when not an HTTP status

	// What the server said about the key, read once where the answer is
	// classified, for the credential pool to act on.

	// ResetAt and ResetIn are when the server said the key's limit
	// resets, as a time (ResetAt) or as a wait from the answer (ResetIn);
	// both zero when it did not say. For billing or a spent quota they
	// come from the error's body or Retry-After; for a rate limit from
	// the reset headers. A wait stays a wait: the pool adds it to its
	// store's clock, not the client's.
	ResetAt time.Time
	ResetIn time.Duration
	// Revoked: a 401 saying the key itself is invalid or revoked, which
	// no wait mends.
	Revoked bool
	// QuotaSpent: a 429 saying a usage limit is reached, which a wait of
	// seconds does not lift.
	QuotaSpent bool

	// Keys is the size of the credential pool that had no key to offer,
	// Dead how many of them are dead, and Until when its first cooling
	// key comes back (zero when every key is dead); 0 when the call was
	// not refused for that.
	Keys, Dead int
	Until      time.Time

	// Setting names where the key is configured, for the user message
	// of a refused key (PoolOptions.Setting); "" is the main model's.
	Setting string
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Class == ClassNotConfigured:
		b.WriteString("no model configured")
	case e.Keys > 0:
		b.WriteString(e.exhausted())
	case e.Class == ClassAuth:
		// The server's message is left out: providers quote part of the
		// rejected key in it.
		fmt.Fprintf(&b, "model API key rejected (HTTP %d)", e.Status)
	case e.Class == ClassPayment:
		fmt.Fprintf(&b, "payment required (HTTP %d)", e.Status)
	case e.Class == ClassModelNotFound:
		fmt.Fprintf(&b, "model not found: %s", e.Model)
	case e.Class == ClassBadRequest:
		b.WriteString("bad request")
	case e.Class == ClassRateLimited:
		b.WriteString("rate limited")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
		}
	case e.Class == ClassTimeout:
		fmt.Fprintf(&b, "no answer within %s", e.Timeout)
	case e.Class == ClassUnavailable:
		b.WriteString("model server unavailable")
	case e.Class == ClassCanceled:
		b.WriteString("canceled")
	default:
		b.WriteString(string(e.Class))
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Status != 0 && e.Class != ClassAuth && e.Class != ClassPayment {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Message != "" && e.Class != ClassAuth {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// exhausted says why a pool had no key: every key cooling until the
// first comes back, every key dead, or some of each.
func (e *Error) exhausted() string {
	until := e.Until.UTC().Format("15:04 MST")
	switch {
	case e.Keys == 1 && e.Until.IsZero():
		return "the only key rejected as invalid or revoked"
	case e.Keys == 1:
		// A pool of one is out of keys only when it cools, or has a
		// fallback to move to: not "all 1 keys".
		return "the only key cooling until " + until
	case e.Until.IsZero():
		return fmt.Sprintf("all %d keys rejected as invalid or revoked", e.Keys)
	case e.Dead > 0:
		return fmt.Sprintf("all %d keys out: %d cooling until %s, %d rejected as invalid or revoked", e.Keys, e.Keys-e.Dead, until, e.Dead)
	}
	return fmt.Sprintf("all %d keys cooling until %s", e.Keys, until)
}

// ClassOf returns the Class of the first *Error in err's chain, or "" when
// there is none.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}

// RetryAfterOf is how long the server behind err's first *Error asked
// to wait, or 0.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// mainKeySetting is where the main model's key is configured.
const mainKeySetting = "HERALD_MODEL_API_KEY / model.api_key"

// UserMessage is one line a user can act on for a failed model call. It
// never holds the API key or the request. It is "" for a nil err.
func UserMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "the model call failed; try again later"
	}
	if e.Keys > 0 {
		if e.Until.IsZero() && e.Keys == 1 {
			return fmt.Sprintf("the model provider rejected the API key as invalid or revoked; replace it in %s, or bring it back with herald model keys --revive once the provider takes it again", cmp.Or(e.Setting, mainKeySetting))
		}
		if e.Until.IsZero() {
			return fmt.Sprintf("the model provider rejected all %d API keys as invalid or revoked; replace them in %s, or bring back one the provider took back with herald model keys --revive", e.Keys, cmp.Or(e.Setting, "HERALD_MODEL_API_KEYS / model.credentials"))
		}
		why := ""
		if e.Message != "" {
			why = " (" + e.Message + ")"
		}
		if e.Keys == 1 {
			return fmt.Sprintf("the model provider refused the API key for now: %s%s; try again then", e.exhausted(), why)
		}
		return fmt.Sprintf("the model provider refused every API key for now: %s%s; try again then", e.exhausted(), why)
	}
	switch e.Class {
	case ClassNotConfigured:
		return "no model is configured: set HERALD_MODEL (model.name) to a model name and HERALD_MODEL_BASE_URL (model.base_url) to an OpenAI-compatible endpoint"
	case ClassAuth:
		setting := cmp.Or(e.Setting, mainKeySetting)
		if e.Status == http.StatusForbidden {
			return fmt.Sprintf("the model provider refused the API key (HTTP 403; check %s)", setting)
		}
		return fmt.Sprintf("the model API key was rejected (check %s)", setting)
	case ClassPayment:
		return fmt.Sprintf("the model provider refused the request for billing reasons: add credit or check the plan of the account behind the key in %s", cmp.Or(e.Setting, mainKeySetting))
	case ClassModelNotFound:
		if e.Status == http.StatusForbidden {
			return fmt.Sprintf("the model provider denied access to model %s: %s", e.Model, cmp.Or(e.Message, "HTTP 403"))
		}
		// A 404 that does not talk about a model usually means the base
		// URL misses its path (…/v1), not that the model is wrong.
		if e.Message != "" && !strings.Contains(strings.ToLower(e.Message), "model") {
			return fmt.Sprintf("model not found: %s (check HERALD_MODEL / model.name, and that HERALD_MODEL_BASE_URL is the API's base URL, usually ending in /v1)", e.Model)
		}
		return fmt.Sprintf("model not found: %s (check HERALD_MODEL / model.name)", e.Model)
	case ClassBadRequest:
		if e.Message != "" {
			return "the model server rejected the request: " + e.Message
		}
		return "the model server rejected the request"
	case ClassContextOverflow:
		return "the conversation is longer than the model takes, even with its oldest messages left out; /new starts a fresh session"
	case ClassRateLimited:
		if e.RetryAfter > 0 {
			return fmt.Sprintf("the model provider is rate limiting requests; try again in %s", e.RetryAfter.Round(time.Second))
		}
		return "the model provider is rate limiting requests; try again shortly"
	case ClassTimeout:
		return fmt.Sprintf("the model did not answer within %s; try again", e.Timeout)
	case ClassUnavailable:
		if e.Host != "" {
			return fmt.Sprintf("the model server at %s is unavailable; try again later", e.Host)
		}
		return "the model server is unavailable; try again later"
	case ClassCanceled:
		return "the model call was canceled"
	}
	return "the model call failed; try again later"
}

// fail wraps e into the error Complete returns.
func fail(e *Error) error {
	return &errs.Error{Op: "llm.Complete", Code: e.Class.code(), Err: e}
}

// scrubbed is a cause whose text had the API key removed. Unwrap still
// reaches the original so errors.Is(err, context.Canceled) keeps working.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// minSecretLen is the shortest key that is scrubbed from messages: a
// shorter "key" is a placeholder, and removing every occurrence of one or
// two characters would garble the message without hiding anything.
const minSecretLen = 6

// scrub removes secret from s, flattens it to one line and bounds its length.
func scrub(s, secret string) string {
	if len(secret) >= minSecretLen {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	const max = 300
	if len(s) > max {
		cut := max
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func scrubErr(err error, secret string) error {
	if err == nil {
		return nil
	}
	// Keep the context errors themselves so callers can compare them.
	if err == context.Canceled || err == context.DeadlineExceeded {
		return err
	}
	return &scrubbed{msg: scrub(err.Error(), secret), err: err}
}
