package media

import (
	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/sessions"
)

// Assembly is what the media capabilities (Capability, files in;
// Outbound, files out) are made with: what every capability is, and the
// store of file bytes.
type Assembly interface {
	capability.Assembled
	Files() Store
}

// Capability is what herald does with the files people send, as a
// gateway runs it: a Runner around the turns that readies each turn's
// files before the model sees the message. It decorates the runner the
// capabilities before it made, so it is last in the gateway's list:
// every other decorator then sees the entry with its files ready.
// Pictures a model is not shown are described by auxiliary.vision (the
// main model when unset); voice notes are transcribed by the stt
// endpoint when one is set.
func Capability(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	cfg := a.Config
	vision, err := a.AuxClient(cfg.Auxiliary.Vision, "auxiliary.vision.api_key", nil, a.Model)
	if err != nil {
		return nil, err
	}
	var stt *Transcriber
	if cfg.STT.Configured() {
		stt, err = NewTranscriber(TranscriberOptions{BaseURL: cfg.STT.BaseURL, Model: cfg.STT.Model, APIKey: cfg.STT.APIKey})
		if err != nil {
			return nil, err
		}
	}
	fetchers := map[string]adapters.Fetcher{}
	for _, ad := range a.Adapters {
		if f, ok := ad.(adapters.Fetcher); ok {
			fetchers[ad.Platform()] = f
		}
	}
	r := NewRunner(a.Runner, Options{
		Home:      cfg.Home,
		Workspace: cfg.Tools.Workspace,
		MaxBytes:  cfg.Attachments.MaxBytes,
		ImageMode: cfg.Agent.ImageInputMode,
		Model:     cfg.Model.Name,
		Vision:    vision,
		STT:       stt,
		Files:     as.Files(),
		Fetcher:   func(platform string) adapters.Fetcher { return fetchers[platform] },
		Commands:  a.Commands,
		Redact:    a.Redact,
		Clock:     a.Clock,
		Logger:    a.Logger.With("part", "media"),
	})
	return &capability.Capability{
		Runner: r,
		Routed: func(router *sessions.Router) error {
			r.Routed(router)
			return nil
		},
	}, nil
}
