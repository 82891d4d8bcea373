package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for MediaOptions.
const (
	DefaultMediaPhotos = 100
	DefaultMediaBytes  = 2 << 20
)

// MediaOptions says what Media measures.
type MediaOptions struct {
	Photos  int    // photos measured; DefaultMediaPhotos when 0
	Bytes   int    // the photo's size, about; DefaultMediaBytes when 0
	TempDir string // where the photos are kept (and removed); the system's when empty
}

// MediaResult is one run's figures, as `herald bench media --json` prints
// them.
type MediaResult struct {
	Photos    int     `json:"photos"`
	Bytes     int     `json:"bytes"` // the photo's size
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	SentBytes int     `json:"sent_bytes"` // what a model request carries of it
	P50Ms     float64 `json:"p50_ms"`     // the time a photo adds before the model call
	P99Ms     float64 `json:"p99_ms"`
	RawP50Ms  float64 `json:"raw_p50_ms"` // the bare download of the same bytes
	RawP99Ms  float64 `json:"raw_p99_ms"`
	// CPUMsPerPhoto and RawCPUMsPerPhoto are the CPU time the process
	// used for a photo, each side's (server and client alike): what
	// the times would come to on a core of its own.
	CPUMsPerPhoto    float64 `json:"cpu_ms_per_photo"`
	RawCPUMsPerPhoto float64 `json:"raw_cpu_ms_per_photo"`
}

// Media measures the time a photo adds to a turn before its model call:
// the media runner (media.NewRunner, as the gateway's media capability
// makes it, pictures shown to the model) downloads it through the
// Telegram adapter's Fetch (getFile, then the file) from a Bot API on
// loopback, keeps it on the disk, checks it, scales and encodes it
// (media.LoadImage), and the turn's run then loads it for its request
// as the agent does. Beside it, the raw ceiling: the bare download of
// the same bytes from the same server. The two take turns, photo by
// photo, each photo under a message id of its own so nothing is found
// made already.
func Media(ctx context.Context, opt MediaOptions) (res MediaResult, err error) {
	opt.Photos = cmp.Or(opt.Photos, DefaultMediaPhotos)
	opt.Bytes = cmp.Or(opt.Bytes, DefaultMediaBytes)
	if opt.Photos < 1 || opt.Bytes < 1 {
		return res, fmt.Errorf("photos and bytes must be positive, got %d and %d", opt.Photos, opt.Bytes)
	}
	photo, w, h, err := benchPhoto(opt.Bytes)
	if err != nil {
		return res, err
	}
	res = MediaResult{Photos: opt.Photos, Bytes: len(photo), Width: w, Height: h}
	home, err := os.MkdirTemp(opt.TempDir, "herald-bench-media-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(home)

	api := newBotAPI(photo)
	defer api.srv.Close()
	client := api.srv.Client()
	tg, err := telegram.New(telegram.Options{
		Config:     config.Telegram{Token: benchBotToken, APIURL: api.srv.URL},
		HTTPClient: client,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return res, err
	}
	model := &modelCall{}
	r := media.NewRunner(model, media.Options{
		Home:      home,
		ImageMode: config.ImagesNative,
		Fetcher:   func(string) adapters.Fetcher { return tg },
		Logger:    slog.New(slog.DiscardHandler),
	})

	var herald, raw []time.Duration
	var cpu, rawCPU time.Duration
	for i := -3; i < opt.Photos; i++ { // three to warm up
		cpu0, start := processCPU(), time.Now()
		if _, err := download(ctx, client, api.fileURL()); err != nil {
			return res, fmt.Errorf("raw download: %w", err)
		}
		took := time.Since(start)
		if i >= 0 {
			raw = append(raw, took)
			rawCPU += processCPU() - cpu0
		}

		in := photoTurn(strconv.Itoa(i + 10))
		cpu0, start = processCPU(), time.Now()
		if _, err := r.Run(ctx, &in); err != nil {
			return res, err
		}
		if model.err != nil {
			return res, model.err
		}
		if model.images != 1 {
			return res, fmt.Errorf("the turn was shown %d pictures, want the photo: %s", model.images, model.text)
		}
		took = time.Since(start)
		if i >= 0 {
			herald = append(herald, took)
			cpu += processCPU() - cpu0
		}
		res.SentBytes = model.sent
		if err := os.RemoveAll(media.ConvDir(home, in.Conv)); err != nil {
			return res, err
		}
	}
	res.P50Ms, res.P99Ms = run{latencies: herald}.quantiles()
	res.RawP50Ms, res.RawP99Ms = run{latencies: raw}.quantiles()
	res.CPUMsPerPhoto = ms(cpu) / float64(opt.Photos)
	res.RawCPUMsPerPhoto = ms(rawCPU) / float64(opt.Photos)
	return res, nil
}

// photoTurn is a person's Telegram message with the photo.
func photoTurn(msgID string) sessions.TurnInput {
	const conv = "telegram:1"
	return sessions.TurnInput{
		Conv:   conv,
		Origin: outbox.Target{Platform: "telegram", Chat: "1"},
		Entry: sessions.Entry{ID: "e" + msgID, Inbound: sessions.Inbound{
			Conv: conv, Sender: "1", MessageID: msgID, Kind: sessions.KindUser,
			Attachments: []sessions.Attachment{{Name: "photo.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, PlatformID: benchFileID}},
		}},
	}
}

// The bot and the file the bench's Bot API knows.
const (
	benchBotToken = "1000:bench-token"
	benchFileID   = "AgACAgIAAxkBAAIBench"
	benchFilePath = "photos/file_1.jpg"
)

// botAPI is as much of Telegram's Bot API as a photo's download takes:
// getFile, which tells the file's path, and the file route, which
// serves its bytes.
type botAPI struct {
	srv   *httptest.Server
	photo []byte
}

func newBotAPI(photo []byte) *botAPI {
	a := &botAPI{photo: photo}
	mux := http.NewServeMux()
	mux.HandleFunc("/bot"+benchBotToken+"/getFile", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{
			"file_id": benchFileID, "file_unique_id": "bench", "file_size": len(photo), "file_path": benchFilePath,
		}})
	})
	mux.HandleFunc("/file/bot"+benchBotToken+"/"+benchFilePath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/jpeg")
		w.Header().Set("Content-Length", strconv.Itoa(len(photo)))
		w.Write(photo)
	})
	a.srv = httptest.NewServer(mux)
	return a
}

// fileURL is where the photo's bytes are served.
func (a *botAPI) fileURL() string {
	return a.srv.URL + "/file/bot" + benchBotToken + "/" + benchFilePath
}

func download(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}

// modelCall is what a turn does with its pictures before its model call:
// it loads each for the request, as the agent does.
type modelCall struct {
	images, sent int
	text         string
	err          error
}

func (m *modelCall) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	m.images, m.sent, m.text, m.err = len(in.Images), 0, in.Entry.Text, nil
	for _, img := range in.Images {
		loaded, err := media.LoadImage(ctx, img)
		if err != nil {
			m.err = err
			break
		}
		m.sent += len(loaded.Data)
	}
	return &sessions.TurnOutput{End: sessions.TurnDone}, nil
}

// benchPhoto is a JPEG of about size bytes: a 4000x3000 picture with the
// detail and noise of a phone's photo, at the quality that comes
// nearest.
func benchPhoto(size int) (data []byte, w, h int, err error) {
	w, h = 4000, 3000
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	rng := rand.New(rand.NewPCG(7, 11))
	for y := range h {
		for x := range w {
			v := (x*255/w+y*255/h)/2 + int(rng.IntN(48)) - 24 + ((x/40+y/40)%2)*30
			img.Y[y*img.YStride+x] = uint8(min(max(v, 0), 255))
		}
	}
	for i := range img.Cb {
		img.Cb[i] = uint8(96 + rng.IntN(64))
		img.Cr[i] = uint8(96 + rng.IntN(64))
	}
	qualities := []int{30, 40, 50, 60, 70, 80, 90, 95}
	var best []byte
	for _, q := range qualities {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
			return nil, 0, 0, err
		}
		if best == nil || abs(b.Len()-size) < abs(len(best)-size) {
			best = slices.Clone(b.Bytes())
		}
		if b.Len() > size {
			break
		}
	}
	return best, w, h, nil
}

func abs(n int) int { return max(n, -n) }
