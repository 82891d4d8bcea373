package media

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers WebP with image.Decode

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// What the model providers take of one image: OpenAI and Anthropic both
// scale a picture whose long edge passes about 1568 pixels down
// themselves, and Anthropic refuses one over 5 MB. A picture is sent
// within both bounds, so the provider neither refuses it nor spends the
// upload on pixels it throws away.
const (
	MaxImageEdge  = 1568
	MaxImageBytes = 5 << 20
)

// maxImagePixels bounds what LoadImage decodes: a small file can claim a
// huge picture, and decoding it would take gigabytes.
const maxImagePixels = 50_000_000

// jpegQualities are the qualities LoadImage tries, best first, until the
// encoding fits MaxImageBytes.
var jpegQualities = []int{85, 70, 50}

// The image types a model is sent, as LoadImage makes them, and the ones
// it reads.
const (
	mimeJPEG = "image/jpeg"
	mimePNG  = "image/png"
	mimeGIF  = "image/gif"
	mimeWebP = "image/webp"
)

// ImageType is the type of a picture LoadImage reads (image/jpeg,
// image/png, image/gif or image/webp), sniffed from its first bytes;
// ok is false for anything else.
func ImageType(head []byte) (mime string, ok bool) {
	switch t := http.DetectContentType(head); t {
	case mimeJPEG, mimePNG, mimeGIF, mimeWebP:
		return t, true
	}
	return "", false
}

// LoadImage readies a picture for a model request: it reads img.Path
// (img.Data when Path is empty), scales it down so that its long edge is
// at most MaxImageEdge pixels, and encodes it in at most MaxImageBytes:
// JPEG, or PNG when it has transparency, a PNG that needs no change kept
// as it is. The returned image has Data and MIME set, Name and Path as
// given. What it made of a file is kept for the next call (a least
// recently used cache of 64 MiB, by the file's path, size and
// modification time). Re-encoding also drops what the file carried beside the
// picture (a photo's EXIF, its location included).
// Errors: NotFound (no file at Path), Invalid (not a JPEG, PNG, GIF or
// WebP picture, or a damaged one; ErrImageType for the first), TooLarge
// (over MaxFileBytes, or more than 50 million pixels).
func LoadImage(ctx context.Context, img chat.Image) (chat.Image, error) {
	const op = "media.LoadImage"
	if err := ctx.Err(); err != nil {
		return img, errs.Wrap(op, errs.Closed, err)
	}
	if img.Path == "" {
		out, mime, err := fitImage(op, img.Data)
		if err != nil {
			return img, err
		}
		img.Data, img.MIME = out, mime
		return img, nil
	}
	fi, err := os.Stat(img.Path)
	if errors.Is(err, os.ErrNotExist) {
		return img, errs.E(op, errs.NotFound, "no file at %s", img.Path)
	}
	if err != nil {
		return img, errs.Wrap(op, errs.Unavailable, err)
	}
	key := keyOf(img.Path, fi)
	if data, mime, ok := loaded.get(key); ok {
		img.Data, img.MIME = data, mime
		return img, nil
	}
	data, err := readBounded(op, img.Path)
	if err != nil {
		return img, err
	}
	out, mime, err := fitImage(op, data)
	if err != nil {
		return img, err
	}
	loaded.put(key, out, mime)
	img.Data, img.MIME = out, mime
	return img, nil
}

// ErrImageType is in the chain of LoadImage's error for a file that is
// not a picture of a type it reads.
var ErrImageType = errors.New("not a JPEG, PNG, GIF or WebP picture")

// readBounded reads the file at path, refusing one over MaxFileBytes.
func readBounded(op, path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.E(op, errs.NotFound, "no file at %s", path)
	}
	if err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	if len(data) > MaxFileBytes {
		return nil, errs.E(op, errs.TooLarge, "%s is over %d bytes", path, MaxFileBytes)
	}
	return data, nil
}

// fitImage decodes data and encodes it within the bounds, returning the
// encoding and its type.
func fitImage(op string, data []byte) ([]byte, string, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) {
		return nil, "", &errs.Error{Op: op, Code: errs.Invalid, Msg: ErrImageType.Error(), Err: ErrImageType}
	}
	if err != nil {
		return nil, "", errs.E(op, errs.Invalid, "the picture is damaged: %v", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, "", errs.E(op, errs.Invalid, "the picture is damaged: it is %dx%d", cfg.Width, cfg.Height)
	}
	if cfg.Width*cfg.Height > maxImagePixels {
		return nil, "", errs.E(op, errs.TooLarge, "the picture is %dx%d, over %d pixels", cfg.Width, cfg.Height, maxImagePixels)
	}
	fits := max(cfg.Width, cfg.Height) <= MaxImageEdge
	src, err := decodeImage(format, data)
	if err != nil {
		return nil, "", errs.E(op, errs.Invalid, "the picture is damaged: %v", err)
	}
	if format == "png" && fits && len(data) <= MaxImageBytes {
		// Decoded in full above, so a damaged PNG is not sent as it is.
		return data, mimePNG, nil
	}
	alpha := !opaque(src)
	for edge := min(max(cfg.Width, cfg.Height), MaxImageEdge); edge >= 64; edge = edge * 3 / 4 {
		scaled := scaleTo(src, edge)
		if alpha {
			if out, ok := encodePNG(scaled); ok {
				return out, mimePNG, nil
			}
			scaled = onWhite(scaled)
		}
		for _, q := range jpegQualities {
			if out, ok := encodeJPEG(scaled, q); ok {
				return out, mimeJPEG, nil
			}
		}
	}
	return nil, "", errs.E(op, errs.TooLarge, "the picture does not encode within %d bytes", MaxImageBytes)
}

// decodeImage decodes data of format; a GIF gives its first frame.
func decodeImage(format string, data []byte) (image.Image, error) {
	if format == "gif" {
		return gif.Decode(bytes.NewReader(data))
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	return img, err
}

// scaleTo is src scaled so its long edge is edge pixels; src itself when
// it is that small already.
func scaleTo(src image.Image, edge int) image.Image {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	if max(w, h) <= edge {
		return src
	}
	if w >= h {
		w, h = edge, max(1, h*edge/w)
	} else {
		w, h = max(1, w*edge/h), edge
	}
	if y, ok := src.(*image.YCbCr); ok {
		if dst, ok := shrinkYCbCr(y, w, h); ok {
			return dst
		}
	}
	rgba, ok := src.(*image.RGBA)
	if !ok || b.Min != (image.Point{}) {
		rgba = image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(rgba, rgba.Bounds(), src, b.Min, draw.Src)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	shrink(rgba.Pix, rgba.Stride, b.Dx(), b.Dy(), dst.Pix, dst.Stride, w, h, 4)
	return dst
}

// shrinkYCbCr scales a decoded JPEG down plane by plane, keeping it
// YCbCr: no conversion to RGB and back, which would cost as much as the
// scaling. ok is false for a layout it does not handle.
func shrinkYCbCr(src *image.YCbCr, w, h int) (*image.YCbCr, bool) {
	b := src.Bounds()
	cw, ch, ok := chromaSize(src.SubsampleRatio, b.Dx(), b.Dy())
	if !ok || b.Min != (image.Point{}) {
		return nil, false
	}
	dst := image.NewYCbCr(image.Rect(0, 0, w, h), src.SubsampleRatio)
	dcw, dch, _ := chromaSize(src.SubsampleRatio, w, h)
	shrink(src.Y, src.YStride, b.Dx(), b.Dy(), dst.Y, dst.YStride, w, h, 1)
	shrink(src.Cb, src.CStride, cw, ch, dst.Cb, dst.CStride, dcw, dch, 1)
	shrink(src.Cr, src.CStride, cw, ch, dst.Cr, dst.CStride, dcw, dch, 1)
	return dst, true
}

// chromaSize is the size of the chroma planes of a w×h YCbCr picture.
func chromaSize(r image.YCbCrSubsampleRatio, w, h int) (cw, ch int, ok bool) {
	switch r {
	case image.YCbCrSubsampleRatio444:
		return w, h, true
	case image.YCbCrSubsampleRatio422:
		return (w + 1) / 2, h, true
	case image.YCbCrSubsampleRatio420:
		return (w + 1) / 2, (h + 1) / 2, true
	case image.YCbCrSubsampleRatio440:
		return w, (h + 1) / 2, true
	}
	return 0, 0, false
}

// shrink scales the sw×sh plane src (n bytes a pixel, rows stride
// bytes apart) down to the w×h plane dst by averaging the source pixels
// under each destination pixel, each byte of a pixel on its own (a box
// filter): a photo loses nothing to aliasing, for one read of each
// source byte. The kernels of x/image/draw that average as well
// (BiLinear, CatmullRom) weigh each source pixel many times over and
// take seconds on a 12-megapixel photo.
func shrink(src []byte, stride, sw, sh int, dst []byte, dstride, w, h, n int) {
	xs := make([]int, w+1) // dst column x averages source columns xs[x] to xs[x+1]
	for x := range xs {
		xs[x] = x * sw / w
	}
	sums := make([]uint32, n*w)
	for y := range h {
		y0, y1 := y*sh/h, (y+1)*sh/h
		clear(sums)
		for sy := y0; sy < y1; sy++ {
			row := src[sy*stride : sy*stride+n*sw]
			if n == 1 {
				// The planes of a JPEG: one byte a pixel, the common case.
				for x := range w {
					var sum uint32
					for _, v := range row[xs[x]:xs[x+1]] {
						sum += uint32(v)
					}
					sums[x] += sum
				}
				continue
			}
			for x := range w {
				for i := n * xs[x]; i < n*xs[x+1]; i += n {
					for c := range n {
						sums[n*x+c] += uint32(row[i+c])
					}
				}
			}
		}
		out := dst[y*dstride:]
		for x := range w {
			k := uint32((xs[x+1] - xs[x]) * (y1 - y0))
			for c := range n {
				out[n*x+c] = uint8((sums[n*x+c] + k/2) / k)
			}
		}
	}
}

// opaque reports whether img has no transparent pixel.
func opaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}

// onWhite is img over a white background, for an encoding without
// transparency.
func onWhite(img image.Image) image.Image {
	dst := image.NewRGBA(img.Bounds())
	draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(dst, dst.Bounds(), img, img.Bounds().Min, draw.Over)
	return dst
}

func encodeJPEG(img image.Image, quality int) ([]byte, bool) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: quality}); err != nil {
		return nil, false
	}
	return b.Bytes(), b.Len() <= MaxImageBytes
}

func encodePNG(img image.Image) ([]byte, bool) {
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, img); err != nil {
		return nil, false
	}
	return b.Bytes(), b.Len() <= MaxImageBytes
}
