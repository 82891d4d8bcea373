// Package redact is herald's one redactor: it replaces the values of
// herald's configured secrets (and what the platform adapters add) in
// everything that leaves it — log lines, tool results on their way to
// the model, outbox text on its way to a chat, cron outputs, kanban
// comments, stored failure reasons. The gateway builds one from its
// config (config.Config.Secrets) and hands its String to every part that
// lets text out, so all of them mask the same values the same way.
package redact

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
)

// Mask is what a secret is shown as. Secrets are masked whole: even a
// token's last characters help someone guessing which token it is.
const Mask = "****"

// minSecretLen is the shortest value treated as a secret. Shorter ones
// would mangle ordinary words all over the logs, and guard nothing: a
// credential of three characters is guessed, not leaked.
const minSecretLen = 4

// Redactor replaces known secret values in text with Mask. Whatever a
// library puts in an error (a request URL with a bot token in its path,
// a DSN), or a command prints, the secret itself never leaves.
//
// Masks added with AddMasks run after the replacement: credentials that
// are not in the config, such as the token inside a Discord
// interaction's MessageID. The nil Redactor masks nothing.
type Redactor struct {
	r     *strings.Replacer
	forms []string // the secrets as they are replaced, longest first
	masks atomic.Pointer[[]func(string) string]
}

// New returns a Redactor for secrets. Values shorter than four
// characters are ignored.
func New(secrets []string) *Redactor {
	var list []string
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		// A secret inside JSON (a tool's result, an error body) is
		// written escaped: "&" as \u0026, a quote as \". Both forms go.
		for _, form := range []string{s, jsonForm(s)} {
			if !slices.Contains(list, form) {
				list = append(list, form)
			}
		}
	}
	if len(list) == 0 {
		return &Redactor{}
	}
	// Longest first: a secret that contains another is replaced whole.
	slices.SortFunc(list, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(list))
	for _, s := range list {
		pairs = append(pairs, s, Mask)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), forms: list}
}

// jsonForm is s as encoding/json writes it inside a string.
func jsonForm(s string) string {
	b, err := json.Marshal(s)
	if err != nil || len(b) < 2 {
		return s
	}
	return string(b[1 : len(b)-1])
}

// AddMasks adds masks run on every string from then on. The loggers
// that already use r mask with them too; attributes bound with With
// before the call keep the masking they had.
func (r *Redactor) AddMasks(masks ...func(string) string) {
	var all []func(string) string
	if cur := r.masks.Load(); cur != nil {
		all = slices.Clone(*cur)
	}
	all = append(all, masks...)
	r.masks.Store(&all)
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

// Unsettled reports how many bytes at the end of text may be the start
// of a secret whose rest has not been written yet. Text shown as it is
// written (a reply the model streams) shows only what comes before
// them: masked piece by piece, or whole at each step, a secret written
// across two pieces would otherwise show its first part. The masks added
// with AddMasks are not looked at.
func (r *Redactor) Unsettled(text string) int {
	if r == nil {
		return 0
	}
	held := 0
	for _, s := range r.forms {
		// The longest end of text that s starts with, shorter than s: a
		// whole s is masked already.
		for i := max(0, len(text)-len(s)+1); i < len(text)-held; i++ {
			if text[i] == s[0] && strings.HasPrefix(s, text[i:]) {
				held = len(text) - i
				break
			}
		}
	}
	// The text shown and the text held are masked apart, so the cut may
	// not fall inside a whole secret (one that ends with what starts
	// another): it moves back to that secret's start, until none spans it.
	cut := len(text) - held
	for moved := held > 0; moved; {
		moved = false
		for _, s := range r.forms {
			lo, hi := max(0, cut-len(s)+1), min(len(text), cut+len(s)-1)
			if lo >= hi {
				continue
			}
			if i := strings.Index(text[lo:hi], s); i >= 0 {
				cut, moved = lo+i, true
			}
		}
	}
	return len(text) - cut
}

// Func is r's String, or nil when r is nil: for the options of the parts
// that take a func(string) string and treat nil as masking nothing.
func (r *Redactor) Func() func(string) string {
	if r == nil {
		return nil
	}
	return r.String
}

// NewLogger returns a logger of JSON lines to w at level, r masking
// every message and attribute value.
func NewLogger(w io.Writer, level slog.Leveler, r *Redactor) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(Handler(h, r))
}

// Handler wraps h so that r masks every message and attribute. It wraps
// even a Redactor without secrets, since masks may be added later
// (AddMasks).
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
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

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(clean), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), r: h.r}
}

func (h *handler) attr(a slog.Attr) slog.Attr {
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
