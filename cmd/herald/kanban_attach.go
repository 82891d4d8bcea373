package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/kanban"
)

// kanbanAttachCommand is attach: a person's file for a card's workers.
func (m *Main) kanbanAttachCommand(with withBoard) *cobra.Command {
	var (
		name       string
		attachJSON bool
	)
	attach := &cobra.Command{
		Use:   "attach ID FILE [--name N]",
		Short: "Attach a file to a card: its workers are handed its path",
		Long: `Attach a file to a card, up to kanban.attachment_max_bytes (25 MiB by
default). A copy is kept in $HERALD_HOME/kanban/attachments/<card>/<name>
and each worker of the card is handed its absolute path: a command lane
in HERALD_KANBAN_ATTACHMENTS (one path a line), the herald lane in its
prompt. A card has one attachment of a name: give another with --name.
An archived card takes none.`,
		Args: cardArgs("a card's id and a file", 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				a, err := attachFile(ctx, b, args[0], args[1], name)
				if err != nil {
					return m.kanbanError(args[0], err)
				}
				if attachJSON {
					return m.printJSON(a)
				}
				_, err = fmt.Fprintf(m.Stdout, "attached %s to %s (%d bytes): %s\n", a.Name, a.Card, a.Size, a.Path)
				return err
			})
		},
	}
	attach.Flags().StringVar(&name, "name", "", "the attachment's name (default the file's)")
	addJSONFlag(attach, &attachJSON)
	return attach
}

// attachFile attaches the file at path to card as name (its own name
// when "").
func attachFile(ctx context.Context, b *board, card, path, name string) (kanban.Attachment, error) {
	f, err := os.Open(path)
	if err != nil {
		return kanban.Attachment{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return kanban.Attachment{}, fmt.Errorf("%s is a directory: attach its files one by one, or an archive of it", path)
	}
	if name == "" {
		name = filepath.Base(path)
	}
	return b.svc.Attach(ctx, card, name, f, cliActor)
}
