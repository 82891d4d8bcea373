package kanban

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/heraldgw/herald/internal/errs"
)

// DefaultAttachmentMaxBytes bounds one attachment
// (kanban.attachment_max_bytes) when the service does not say.
const DefaultAttachmentMaxBytes = 25 << 20

// The board home (Service.Root) keeps attachments/<card>/<name>, each
// written first under attachments/.incoming/ and linked into place only
// whole: a file under its name is never a partial one.
const (
	attachmentsDir = "attachments"
	incomingDir    = ".incoming"
)

// AttachmentPath is where card's attachment name is kept on this
// instance, as an absolute path (a worker may run anywhere).
func (s *Service) AttachmentPath(card, name string) string {
	p := filepath.Join(s.Root, attachmentsDir, card, name)
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// AttachmentLimit is the most bytes one attachment may have
// (AttachmentMaxBytes, else DefaultAttachmentMaxBytes).
func (s *Service) AttachmentLimit() int64 {
	if s.AttachmentMaxBytes > 0 {
		return s.AttachmentMaxBytes
	}
	return DefaultAttachmentMaxBytes
}

// Attach keeps what r reads as card's attachment name and records it,
// with an attached event. The file is written aside and moved under its
// name only once it is whole and within the limit, so a refused one
// leaves nothing. Errors: NotFound (no card), Invalid (a bad name, an
// archived card, a read of r that failed), Conflict (the card has an
// attachment of that name), TooLarge (over AttachmentMaxBytes).
func (s *Service) Attach(ctx context.Context, cardID, name string, r io.Reader, actor string) (Attachment, error) {
	const op = "kanban.Attach"
	if err := CheckAttachmentName(op, name); err != nil {
		return Attachment{}, err
	}
	if s.Root == "" {
		return Attachment{}, errs.E(op, errs.Invalid, "this process has no board home to keep attachments in")
	}
	k, err := s.read(ctx, op, cardID)
	if err != nil {
		return Attachment{}, err
	}
	if k.Status == StatusArchived {
		return Attachment{}, errs.E(op, errs.Invalid, "%s is archived: it takes no attachments", k.ID)
	}
	if err := s.nameFree(ctx, op, k.ID, name); err != nil {
		return Attachment{}, err
	}
	a := Attachment{Card: k.ID, Name: name, CreatedBy: actor, Path: s.AttachmentPath(k.ID, name)}
	tmp, err := s.receive(op, k.ID, r, &a)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		return Attachment{}, err
	}
	owned, err := s.place(ctx, op, tmp, a)
	if err != nil {
		return Attachment{}, err
	}
	if a.CreatedAt, err = s.Store.Now(ctx); err == nil {
		_, err = s.Store.Apply(ctx, Change{
			Attachments: []Attachment{a},
			Events: []Event{{Board: k.Board, Card: k.ID, Kind: EventAttached, Actor: actor, Text: name, At: a.CreatedAt,
				Data: map[string]any{"size": a.Size, "sha256": a.SHA256}}},
		})
	}
	if err != nil {
		if owned && !s.recorded(ctx, a) {
			_ = os.Remove(a.Path)
		}
		if errs.Is(err, errs.Conflict) {
			return Attachment{}, taken(op, k.ID, name)
		}
		return Attachment{}, err
	}
	return a, nil
}

// recorded reports whether card has a row of a's name and contents
// (an attach of the same file that won the race to record it, whose
// row names the file this one placed), or whether that cannot be told:
// the file is then kept rather than risk a row without one.
func (s *Service) recorded(ctx context.Context, a Attachment) bool {
	as, err := s.Store.Attachments(ctx, a.Card)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(as, func(r Attachment) bool { return r.Name == a.Name && r.SHA256 == a.SHA256 })
}

// taken is the refusal of a second attachment of one name.
func taken(op, card, name string) error {
	return errs.E(op, errs.Conflict, "%s has an attachment named %s already: attach this one under another name (--name, or ?name=)", card, name)
}

// nameFree refuses, with taken, a name card has an attachment of.
func (s *Service) nameFree(ctx context.Context, op, card, name string) error {
	as, err := s.Store.Attachments(ctx, card)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(as, func(a Attachment) bool { return a.Name == name }) {
		return taken(op, card, name)
	}
	return nil
}

// sourceReader notes why a read of the attachment's source failed, to
// tell the sender's failure from the disk's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (x *sourceReader) Read(p []byte) (int, error) {
	n, err := x.r.Read(p)
	if err != nil && err != io.EOF {
		x.err = err
	}
	return n, err
}

// receive writes r to a file of its own under attachments/.incoming,
// reading one byte past the limit at most, and fills in a's size and
// sum. It returns the file's name ("" when none was made), which is the
// caller's to remove.
func (s *Service) receive(op, card string, r io.Reader, a *Attachment) (string, error) {
	incoming := filepath.Join(s.Root, attachmentsDir, incomingDir)
	if err := os.MkdirAll(incoming, 0o755); err != nil {
		return "", errs.Wrap(op, errs.Internal, err)
	}
	f, err := os.CreateTemp(incoming, card+"-*")
	if err != nil {
		return "", errs.Wrap(op, errs.Internal, err)
	}
	limit := s.AttachmentLimit()
	src := &sourceReader{r: io.LimitReader(r, limit+1)}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum), src)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case src.err != nil:
		return f.Name(), errs.Wrap(op, errs.Invalid, fmt.Errorf("reading attachment %s: %w", a.Name, src.err))
	case err != nil:
		return f.Name(), errs.Wrap(op, errs.Internal, err)
	case n > limit:
		return f.Name(), errs.E(op, errs.TooLarge, "attachment %s is over the limit of %d bytes (kanban.attachment_max_bytes)", a.Name, limit)
	}
	a.Size, a.SHA256 = n, hex.EncodeToString(sum.Sum(nil))
	return f.Name(), nil
}

// place links the received file tmp under a's path, which a link never
// replaces, and reports whether the file there is this call's. A file
// already there with no attachment recorded is one an attach left when
// it was cut short, or one under way: the same contents are taken as
// they are (the attach tried again), other contents are refused.
func (s *Service) place(ctx context.Context, op, tmp string, a Attachment) (owned bool, err error) {
	if err := os.MkdirAll(filepath.Dir(a.Path), 0o755); err != nil {
		return false, errs.Wrap(op, errs.Internal, err)
	}
	err = os.Link(tmp, a.Path)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, errs.Wrap(op, errs.Internal, err)
	}
	if err := s.nameFree(ctx, op, a.Card, a.Name); err != nil {
		return false, err
	}
	if same, err := sameContents(a.Path, a); err != nil || !same {
		return false, errs.E(op, errs.Conflict, "%s has a file %s that no attachment records (an attach of it is under way, or was cut short): try again, or remove that file", a.Card, a.Path)
	}
	return false, nil
}

// sameContents reports whether the file at path holds what a names.
func sameContents(path string, a Attachment) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sum := sha256.New()
	n, err := io.Copy(sum, f)
	if err != nil {
		return false, err
	}
	want, err := hex.DecodeString(a.SHA256)
	return err == nil && n == a.Size && bytes.Equal(sum.Sum(nil), want), nil
}

// Attachments returns a card's attachments, oldest first, with their
// paths on this instance. Errors: NotFound (no card).
func (s *Service) Attachments(ctx context.Context, cardID string) ([]Attachment, error) {
	k, err := s.read(ctx, "kanban.Attachments", cardID)
	if err != nil {
		return nil, err
	}
	return s.attachments(ctx, k.ID)
}

func (s *Service) attachments(ctx context.Context, card string) ([]Attachment, error) {
	as, err := s.Store.Attachments(ctx, card)
	for i := range as {
		as[i].Path = s.AttachmentPath(card, as[i].Name)
	}
	return as, err
}

// Attachment returns one of a card's attachments, with its path on this
// instance. Errors: NotFound (no card, or no attachment of that name).
func (s *Service) Attachment(ctx context.Context, cardID, name string) (Attachment, error) {
	const op = "kanban.Attachment"
	as, err := s.Attachments(ctx, cardID)
	if err != nil {
		return Attachment{}, err
	}
	for _, a := range as {
		if a.Name == name {
			return a, nil
		}
	}
	return Attachment{}, errs.E(op, errs.NotFound, "%s has no attachment named %q", cardID, name)
}

// attachmentPaths are the paths of a card's attachments, oldest first,
// as its worker is handed them.
func (s *Service) attachmentPaths(ctx context.Context, card string) ([]string, error) {
	as, err := s.attachments(ctx, card)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(as))
	for i, a := range as {
		paths[i] = a.Path
	}
	return paths, nil
}
