package media

import (
	"context"
	"os"
)

// hear turns a voice note or audio into the person's words, through the
// speech-to-text endpoint. The transcript is kept beside the file, so a
// run of the turn again on this instance transcribes nothing twice.
// Without an endpoint the model is told a voice note came unheard, and
// the person how to have it heard.
func (r *Runner) hear(ctx context.Context, t *turnFiles, f file, platform string) {
	if r.opts.STT == nil {
		t.lines = append(t.lines, lineNotHeard(f.name))
		t.notices = append(t.notices, noticeNotHeard)
		return
	}
	kept := f.path + ".transcript.txt"
	words, err := os.ReadFile(kept)
	if err != nil {
		data, ok := r.get(ctx, t, f, platform)
		if !ok {
			return
		}
		text, err := r.opts.STT.Transcribe(ctx, f.name, f.att.MIME, data)
		if err != nil {
			r.log.Warn("transcribing a voice note failed", "name", f.name, "err", err)
			t.lines = append(t.lines, lineNotTranscribed(f.name, r.reason(err)))
			return
		}
		words = []byte(text)
		if err := writeFile(kept, words); err != nil {
			r.log.Warn("keeping a transcript failed", "path", kept, "err", err)
		}
	}
	if len(words) == 0 {
		t.lines = append(t.lines, lineSilent(f.name))
		return
	}
	t.words = append(t.words, string(words))
}
