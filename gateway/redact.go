package gateway

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
)

// minSecretLen is the shortest value treated as a secret. Shorter ones
// would mangle ordinary words all over the logs, and guard nothing: a
// credential of three characters is guessed, not leaked.
const minSecretLen = 4

// Redactor replaces known secret values in text with config.Mask. The
// gateway builds one from its config and runs every log line and every
// platform failure reason it stores through it: whatever a library puts
// in an error (a request URL with a bot token in its path, a DSN), the
// token itself never reaches a log or the dead-letter list.
//
// The adapters that implement adapters.Masker add their own masks
// (UseMaskers): credentials that are not in the config, such as the token
// inside a Discord interaction's MessageID.
type Redactor struct {
	r     *strings.Replacer
	masks atomic.Pointer[[]func(string) string] // the adapters' Mask methods
}

// NewRedactor returns a Redactor for secrets. Values shorter than four
// characters are ignored.
func NewRedactor(secrets []string) *Redactor {
	var list []string
	for _, s := range secrets {
		if len(s) >= minSecretLen && !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return &Redactor{}
	}
	// Longest first: a secret that contains another is replaced whole.
	slices.SortFunc(list, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, config.Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...)}
}

// UseMaskers adds the masks of those of as that implement
// adapters.Masker. The adapters are made after the gateway's logger, so
// the loggers that already use r mask with them from then on; attributes
// bound with With before the call (the adapters' platform names, the
// gateway's parts) keep the masking they had.
func (r *Redactor) UseMaskers(as []adapters.Adapter) {
	var masks []func(string) string
	if cur := r.masks.Load(); cur != nil {
		masks = slices.Clone(*cur)
	}
	for _, a := range as {
		if m, ok := a.(adapters.Masker); ok {
			masks = append(masks, m.Mask)
		}
	}
	r.masks.Store(&masks)
}

// idle reports whether r has nothing to mask.
func (r *Redactor) idle() bool {
	masks := r.masks.Load()
	return r.r == nil && (masks == nil || len(*masks) == 0)
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.r != nil {
		s = r.r.Replace(s)
	}
	if masks := r.masks.Load(); masks != nil {
		for _, mask := range *masks {
			s = mask(s)
		}
	}
	return s
}

// SecretsOf lists the secret values in cfg: every field tagged
// `secret:"true"`, and the credentials inside fields tagged `secret:"url"`
// (password, a lone user part, credential-like query values), both as
// written and unescaped, since either form may turn up in an error.
func SecretsOf(cfg config.Config) []string {
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			if !t.Field(i).IsExported() {
				continue
			}
			switch {
			case f.Kind() == reflect.Struct:
				walk(f)
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
				// model.credentials, model.fallbacks
				for j := range f.Len() {
					walk(f.Index(j))
				}
			case f.Kind() != reflect.String || f.String() == "":
			case t.Field(i).Tag.Get("secret") == "true":
				out = append(out, f.String())
			case t.Field(i).Tag.Get("secret") == "url":
				out = append(out, urlSecrets(f.String())...)
			}
		}
	}
	walk(reflect.ValueOf(cfg))
	return out
}

// urlSecrets returns the credentials in a URL. One that does not parse is
// a secret whole, as config's masking treats it.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	var out []string
	add := func(escaped, plain string) {
		out = append(out, escaped)
		if plain != escaped {
			out = append(out, plain)
		}
	}
	if u.User != nil {
		written := u.User.String() // "user:pass" or "user", escaped
		if p, ok := u.User.Password(); ok {
			_, escaped, _ := strings.Cut(written, ":")
			add(escaped, p)
		} else if name := u.User.Username(); name != "" {
			// A lone user part is often the credential itself.
			add(written, name)
		}
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		name, value, ok := strings.Cut(part, "=")
		if !ok || value == "" || !credentialParam(name) {
			continue
		}
		plain, err := url.QueryUnescape(value)
		if err != nil {
			plain = value
		}
		add(value, plain)
	}
	if u.Fragment != "" {
		add(u.EscapedFragment(), u.Fragment)
	}
	return out
}

// credentialParam tells the query parameters config masks.
func credentialParam(name string) bool {
	name = strings.ToLower(name)
	for _, word := range []string{"pass", "secret", "token", "key", "auth", "sig", "cred"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}

// NewLogger returns the gateway's logger: JSON lines to w at level, with
// every secret of secrets masked in messages and attribute values.
func NewLogger(w io.Writer, level slog.Leveler, secrets []string) *slog.Logger {
	return newLogger(w, level, NewRedactor(secrets))
}

// newLogger is NewLogger masking with r, which may gain the adapters'
// masks later.
func newLogger(w io.Writer, level slog.Leveler, r *Redactor) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(RedactHandler(h, r))
}

// RedactHandler wraps h so that r masks every message and attribute. It
// wraps even a Redactor without secrets, since the adapters' masks may
// come later (UseMaskers).
func RedactHandler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil {
		return h
	}
	return &redactHandler{h: h, r: r}
}

type redactHandler struct {
	h slog.Handler
	r *Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	if h.r.idle() {
		return h.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &redactHandler{h: h.h.WithAttrs(clean), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), r: h.r}
}

func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.r.String(a.Value.String()))
	case slog.KindGroup:
		group := a.Value.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		v := a.Value.Any()
		if err, ok := v.(error); ok {
			a.Value = slog.StringValue(h.r.String(err.Error()))
			break
		}
		// Other values keep their own form unless it holds a secret.
		s := fmt.Sprintf("%+v", v)
		if clean := h.r.String(s); clean != s {
			a.Value = slog.StringValue(clean)
		}
	}
	return a
}
