package bench

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/media"
)

// A short run downloads, keeps and readies every photo, and its figures
// are times: herald's, which include the download, no less than the bare
// download's at the median.
func TestMediaMeasuresEveryPhoto(t *testing.T) {
	res, err := Media(context.Background(), MediaOptions{Photos: 5, Bytes: 1 << 20, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Photos != 5 || res.Width != 4000 || res.Height != 3000 {
		t.Errorf("result = %+v", res)
	}
	if res.Bytes < 1<<19 || res.Bytes > 2<<20 {
		t.Errorf("the photo is %d bytes, want about 1 MiB", res.Bytes)
	}
	if res.SentBytes <= 0 || res.SentBytes > media.MaxImageBytes {
		t.Errorf("a model request carries %d bytes of it, want 1 to %d", res.SentBytes, media.MaxImageBytes)
	}
	if res.RawP50Ms <= 0 || res.RawP99Ms < res.RawP50Ms || res.P99Ms < res.P50Ms || res.P50Ms < res.RawP50Ms {
		t.Errorf("figures = %+v", res)
	}
}
