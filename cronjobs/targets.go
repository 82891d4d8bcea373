package cronjobs

import (
	"fmt"
	"slices"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Delivery target words (Job.Deliver).
const (
	TargetOrigin = "origin" // the conversation the job was made from
	TargetLocal  = "local"  // saved under $HERALD_HOME only
)

// Targets resolves where a job's report goes. Homes maps a platform to
// its home channel ("chat" or "chat:thread"; platforms.<p>.home_channel);
// Platforms are those with an adapter configured in this gateway.
type Targets struct {
	Homes     map[string]string
	Platforms []string
}

// Resolve turns deliver (Job.Deliver; empty is the default: origin when
// there is one, else local) into the targets a report is sent to, with
// duplicates collapsed, in the order given. local reports whether
// "local" was among them; a report is saved whatever its targets.
// Errors: Invalid, naming the item that cannot be resolved and what to
// do about it.
func (ts Targets) Resolve(deliver string, origin *Origin) (targets []outbox.Target, err error) {
	const op = "cronjobs.Resolve"
	deliver = strings.TrimSpace(deliver)
	if deliver == "" {
		deliver = TargetLocal
		if origin != nil && origin.Platform != "" {
			deliver = TargetOrigin
		}
	}
	for item := range strings.SplitSeq(deliver, ",") {
		item = strings.TrimSpace(item)
		var t outbox.Target
		switch {
		case item == "":
			continue
		case item == TargetLocal:
			continue
		case item == TargetOrigin:
			if origin == nil || origin.Platform == "" || origin.Chat == "" {
				return nil, errs.E(op, errs.Invalid, `deliver "origin": the job was not made from a chat; name a target (local, a platform, or platform:chat)`)
			}
			t = outbox.Target{Platform: origin.Platform, Chat: origin.Chat, Thread: origin.Thread}
		case !strings.Contains(item, ":"):
			home, ok := ts.Homes[item]
			if !ts.configured(item) {
				return nil, errs.E(op, errs.Invalid, "deliver %q: %s", item, ts.notConfigured(item))
			}
			if !ok || home == "" {
				return nil, errs.E(op, errs.Invalid, "deliver %q: no home channel is set for %s (platforms.%s.home_channel or %s_HOME_CHANNEL)",
					item, item, item, strings.ToUpper(item))
			}
			chat, thread, _ := strings.Cut(home, ":")
			t = outbox.Target{Platform: item, Chat: chat, Thread: thread}
		default:
			var perr error
			if t, perr = outbox.ParseTarget(item); perr != nil {
				return nil, errs.E(op, errs.Invalid, "deliver %q is not origin, local, a platform or platform:chat[:thread]", item)
			}
			if !ts.configured(t.Platform) {
				return nil, errs.E(op, errs.Invalid, "deliver %q: %s", item, ts.notConfigured(t.Platform))
			}
		}
		if !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	return targets, nil
}

func (ts Targets) configured(platform string) bool { return slices.Contains(ts.Platforms, platform) }

func (ts Targets) notConfigured(platform string) string {
	known := strings.Join(ts.Platforms, ", ")
	if known == "" {
		known = "none"
	}
	return fmt.Sprintf("%s has no adapter configured in this gateway (configured: %s)", platform, known)
}
