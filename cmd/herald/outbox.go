package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// outboxTimeout bounds one outbox command's store calls.
const outboxTimeout = 30 * time.Second

func (m *Main) outboxCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "List the messages waiting to be sent and the dead letters; send a dead letter again",
		Long: `The outbox holds every message herald is to send: replies, notices and
the messages of tools, until a platform accepts them. 'pending' lists
those not sent yet (claimed by a delivery worker or waiting for their
next attempt), 'dead' those given up on with the reason, and 'retry ID'
makes a dead letter pending again, due now with its attempts reset.

The store is the one the config names (see 'herald config check'); a
running gateway may share it.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	withStore := func(cmd *cobra.Command, f func(context.Context, outbox.Store) error) error {
		return m.withStore(cmd, path, outboxTimeout, func(ctx context.Context, _ config.Config, db gateway.Store) error {
			return f(ctx, db.Outbox())
		})
	}
	list := func(use, short, none string, read func(context.Context, outbox.Store, int) ([]outbox.Message, error)) *cobra.Command {
		var (
			asJSON bool
			limit  int
		)
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if limit < 0 {
					return usagef("--limit is %d; want 0 (all) or more", limit)
				}
				return withStore(cmd, func(ctx context.Context, o outbox.Store) error {
					msgs, err := read(ctx, o, limit)
					if err != nil {
						return err
					}
					if asJSON {
						return m.printOutboxJSON(msgs)
					}
					return m.printOutbox(msgs, none)
				})
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the messages")
		c.Flags().IntVar(&limit, "limit", 100, "list at most this many, oldest first; 0 lists all")
		return c
	}
	retry := &cobra.Command{
		Use:   "retry ID",
		Short: "Make a dead letter pending again, due now, its attempts reset",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return usagef("want one dead letter's id (see 'herald outbox dead')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return withStore(cmd, func(ctx context.Context, o outbox.Store) error {
				if err := o.Requeue(ctx, id); err != nil {
					if errs.Is(err, errs.NotFound) {
						return fmt.Errorf("no dead letter %q (see 'herald outbox dead')", id)
					}
					return err
				}
				fmt.Fprintf(m.Stdout, "%s is pending again, due now\n", id)
				return nil
			})
		},
	}
	cmd.AddCommand(
		list("pending", "List the messages not sent yet, oldest first", "no messages waiting to be sent",
			func(ctx context.Context, o outbox.Store, limit int) ([]outbox.Message, error) {
				return o.Pending(ctx, limit)
			}),
		list("dead", "List the dead letters with the reason each was given up on, oldest first", "no dead letters",
			func(ctx context.Context, o outbox.Store, limit int) ([]outbox.Message, error) {
				return o.DeadLetters(ctx, limit)
			}),
		retry,
	)
	return cmd
}

// outboxRow is a message as the listings print it with --json.
type outboxRow struct {
	ID          string    `json:"id"`
	Target      string    `json:"target"`
	Conv        string    `json:"conv,omitempty"`
	Kind        string    `json:"kind,omitempty"`
	Text        string    `json:"text"`
	ReplyTo     string    `json:"reply_to,omitempty"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// Files are what the message sends besides its text, its caption.
	Files []outboxFile `json:"files,omitempty"`
}

// outboxFile is a file of a listed message: its name, type, size, the id
// its bytes are kept under in the store, and whether it goes as a
// picture.
type outboxFile struct {
	Name  string `json:"name"`
	MIME  string `json:"mime,omitempty"`
	Size  int64  `json:"size"`
	Blob  string `json:"blob"`
	Photo bool   `json:"photo,omitempty"`
}

func (m *Main) printOutboxJSON(msgs []outbox.Message) error {
	rows := make([]outboxRow, len(msgs))
	for i, msg := range msgs {
		rows[i] = outboxRow{
			ID: msg.ID, Target: msg.Target.String(), Conv: msg.Conv, Kind: msg.Kind, Text: msg.Text,
			ReplyTo: msg.ReplyTo, Attempts: msg.Attempts, NextAttempt: msg.NextAttempt.UTC(),
			CreatedAt: msg.CreatedAt.UTC(), LastError: msg.LastError,
		}
		for _, f := range msg.Files {
			rows[i].Files = append(rows[i].Files, outboxFile{Name: f.Name, MIME: f.MIME, Size: f.Size, Blob: f.Blob, Photo: f.Photo})
		}
	}
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// printOutbox prints one line a message: its id, attempts, next attempt,
// target, the start of its text (its files' names first) and the last
// error.
func (m *Main) printOutbox(msgs []outbox.Message, none string) error {
	if len(msgs) == 0 {
		_, err := fmt.Fprintln(m.Stdout, none)
		return err
	}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tATTEMPTS\tNEXT ATTEMPT\tTARGET\tTEXT\tLAST ERROR")
	for _, msg := range msgs {
		next := "-"
		if !msg.NextAttempt.IsZero() {
			next = msg.NextAttempt.UTC().Format(time.RFC3339)
		}
		text := msg.Text
		if len(msg.Files) > 0 {
			names := make([]string, len(msg.Files))
			for i, f := range msg.Files {
				names[i] = f.Name
			}
			text = "[" + strings.Join(names, ", ") + "] " + text
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", msg.ID, msg.Attempts, next, msg.Target,
			oneLine(text, 48), oneLine(msg.LastError, 60))
	}
	return w.Flush()
}

// oneLine is s on one line, cut to at most n runes with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s // as it is: a pattern's backslashes are its own
	}
	q := strconv.Quote(s) // control characters escaped, as in a log line
	return q[1 : len(q)-1]
}
