package media_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
)

// photo is a w×h picture with some detail in it: gradients and a grid.
func photo(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x ^ y) & 0xff), 255}
			if x%97 == 0 || y%89 == 0 {
				c = color.RGBA{0, 0, 0, 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

func encodeJPEG(t testing.TB, img image.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// decoded checks what LoadImage made: its type is mime, it decodes as
// that, within the providers' bounds, and it returns its size.
func decoded(t *testing.T, img chat.Image, mime string) image.Rectangle {
	t.Helper()
	if img.MIME != mime {
		t.Fatalf("MIME = %q, want %q", img.MIME, mime)
	}
	if len(img.Data) == 0 || len(img.Data) > media.MaxImageBytes {
		t.Fatalf("Data is %d bytes, want 1 to %d", len(img.Data), media.MaxImageBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil {
		t.Fatalf("the loaded image does not decode: %v", err)
	}
	if "image/"+format != mime {
		t.Fatalf("the data is %s, want %s", format, mime)
	}
	if max(cfg.Width, cfg.Height) > media.MaxImageEdge {
		t.Fatalf("the loaded image is %dx%d, over %d px on its long edge", cfg.Width, cfg.Height, media.MaxImageEdge)
	}
	return image.Rect(0, 0, cfg.Width, cfg.Height)
}

func TestLoadImageScalesALargePhoto(t *testing.T) {
	path := writeTemp(t, "big.jpg", encodeJPEG(t, photo(4000, 3000), 92))
	img, err := media.LoadImage(context.Background(), chat.Image{Name: "big.jpg", Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if r := decoded(t, img, "image/jpeg"); r.Dx() != 1568 || r.Dy() != 1176 {
		t.Errorf("scaled to %dx%d, want 1568x1176 (the aspect kept)", r.Dx(), r.Dy())
	}
	if img.Name != "big.jpg" || img.Path != path {
		t.Errorf("Name and Path = %q %q, want them as given", img.Name, img.Path)
	}

	// A portrait photo is bounded by its height.
	img, err = media.LoadImage(context.Background(), chat.Image{Data: encodeJPEG(t, photo(1000, 2400), 80)})
	if err != nil {
		t.Fatal(err)
	}
	if r := decoded(t, img, "image/jpeg"); r.Dy() != 1568 || r.Dx() != 653 {
		t.Errorf("a portrait scaled to %dx%d, want 653x1568", r.Dx(), r.Dy())
	}
}

func TestLoadImageKeepsASmallPNGAndTurnsOthersToJPEGOrPNG(t *testing.T) {
	var small bytes.Buffer
	if err := png.Encode(&small, photo(300, 200)); err != nil {
		t.Fatal(err)
	}
	img, err := media.LoadImage(context.Background(), chat.Image{Path: writeTemp(t, "s.png", small.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	decoded(t, img, "image/png")
	if !bytes.Equal(img.Data, small.Bytes()) {
		t.Error("a small PNG within the bounds was re-encoded; want it as it was")
	}

	// A large PNG with transparency stays PNG, scaled.
	seeThrough := image.NewNRGBA(image.Rect(0, 0, 2000, 1000))
	for i := 3; i < len(seeThrough.Pix); i += 8 {
		seeThrough.Pix[i] = 0xff
	}
	var big bytes.Buffer
	if err := png.Encode(&big, seeThrough); err != nil {
		t.Fatal(err)
	}
	img, err = media.LoadImage(context.Background(), chat.Image{Data: big.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	if r := decoded(t, img, "image/png"); r.Dx() != 1568 {
		t.Errorf("a transparent PNG scaled to %d wide, want 1568", r.Dx())
	}

	// An opaque GIF becomes a JPEG.
	pal := image.NewPaletted(image.Rect(0, 0, 64, 48), []color.Color{color.Black, color.White})
	var g bytes.Buffer
	if err := gif.Encode(&g, pal, nil); err != nil {
		t.Fatal(err)
	}
	img, err = media.LoadImage(context.Background(), chat.Image{Data: g.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	decoded(t, img, "image/jpeg")
}

func TestLoadImageRefusesWhatIsNoPicture(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		desc string
		img  chat.Image
		code errs.Code
		typ  bool // ErrImageType is in the chain
	}{
		{"text", chat.Image{Data: []byte("hello, not a picture")}, errs.Invalid, true},
		{"a cut JPEG", chat.Image{Data: encodeJPEG(t, photo(400, 300), 80)[:2000]}, errs.Invalid, false},
		{"no file", chat.Image{Path: filepath.Join(t.TempDir(), "gone.jpg")}, errs.NotFound, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := media.LoadImage(ctx, tc.img)
			if !errs.Is(err, tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if got := errors.Is(err, media.ErrImageType); got != tc.typ {
				t.Errorf("ErrImageType in the chain = %v, want %v (%v)", got, tc.typ, err)
			}
		})
	}
}

func TestImageType(t *testing.T) {
	if m, ok := media.ImageType(encodeJPEG(t, photo(8, 8), 80)); !ok || m != "image/jpeg" {
		t.Errorf("ImageType(jpeg) = %q %v", m, ok)
	}
	if m, ok := media.ImageType([]byte("%PDF-1.7")); ok {
		t.Errorf("ImageType(pdf) = %q, want not a picture", m)
	}
}
