package telegram

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

var testBot = identity{ID: 777, Username: "herald_bot"}

func mention(scope string) reader {
	return reader{bot: testBot, trigger: config.TriggerMention, scope: scope}
}

func TestParseUpdate(t *testing.T) {
	tests := []struct {
		desc string
		raw  string
		rd   reader
		skip string // a part of the skip reason; "" when delivered
		want sessions.Inbound
		user string
	}{
		{
			desc: "dm",
			raw:  `{"update_id":1,"message":{"message_id":5,"from":{"id":42,"username":"ann"},"chat":{"id":42,"type":"private"},"text":"hi"}}`,
			rd:   mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:42", Sender: "42", MessageID: "42:5", Text: "hi",
				Meta: map[string]string{MetaMessageID: "5", MetaChatType: "private"}},
			user: "ann",
		},
		{
			desc: "mention after an emoji, offsets in UTF-16",
			raw: `{"update_id":2,"message":{"message_id":6,"from":{"id":42},"chat":{"id":-100,"type":"supergroup"},"text":"🚀 @Herald_Bot go",` +
				`"entities":[{"type":"mention","offset":3,"length":11}]}}`,
			rd: mention(adapters.ScopeShared),
			want: sessions.Inbound{Conv: "telegram:-100", Sender: "42", MessageID: "-100:6", Text: "🚀 @Herald_Bot go",
				Meta: map[string]string{MetaMessageID: "6", MetaChatType: "supergroup"}},
		},
		{
			desc: "leading mention dropped, per-user group session",
			raw: `{"update_id":3,"message":{"message_id":7,"from":{"id":42},"chat":{"id":-100,"type":"group"},"text":"@herald_bot /stop",` +
				`"entities":[{"type":"mention","offset":0,"length":11}]}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:-100:user:42", Sender: "42", MessageID: "-100:7", Text: "/stop",
				Meta: map[string]string{MetaMessageID: "7", MetaChatType: "group", sessions.MetaTarget: "telegram:-100"}},
		},
		{
			desc: "a comma after the leading mention goes with it",
			raw: `{"update_id":3,"message":{"message_id":7,"from":{"id":42},"chat":{"id":-100,"type":"group"},"text":"@herald_bot, /stop 🛑",` +
				`"entities":[{"type":"mention","offset":0,"length":11}]}}`,
			rd: mention(adapters.ScopeShared),
			want: sessions.Inbound{Conv: "telegram:-100", Sender: "42", MessageID: "-100:7", Text: "/stop 🛑",
				Meta: map[string]string{MetaMessageID: "7", MetaChatType: "group"}},
		},
		{
			desc: "text mention of the bot",
			raw: `{"update_id":4,"message":{"message_id":8,"from":{"id":42},"chat":{"id":-100,"type":"group"},"text":"Herald, help",` +
				`"entities":[{"type":"text_mention","offset":0,"length":6,"user":{"id":777}}]}}`,
			rd: mention(adapters.ScopeShared),
			want: sessions.Inbound{Conv: "telegram:-100", Sender: "42", MessageID: "-100:8", Text: "Herald, help",
				Meta: map[string]string{MetaMessageID: "8", MetaChatType: "group"}},
		},
		{
			desc: "photo with caption in a forum topic",
			raw: `{"update_id":5,"message":{"message_id":9,"message_thread_id":3,"is_topic_message":true,"from":{"id":42},` +
				`"chat":{"id":-100,"type":"supergroup","is_forum":true},"caption":"/review this",` +
				`"photo":[{"file_id":"small"},{"file_id":"big","file_size":2048}]}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:-100:3", Sender: "42", MessageID: "-100:9", Text: "/review this",
				Attachments: []sessions.Attachment{{Name: "photo-9.jpg", MIME: "image/jpeg", Size: 2048, Kind: sessions.AttachImage, PlatformID: "big"}},
				Meta:        map[string]string{MetaMessageID: "9", MetaChatType: "supergroup"}},
		},
		{
			desc: "a topic's own first message is not a reply to the bot",
			raw: `{"update_id":6,"message":{"message_id":10,"message_thread_id":3,"is_topic_message":true,"from":{"id":42},` +
				`"chat":{"id":-100,"type":"supergroup"},"text":"chatting","reply_to_message":{"message_id":3,"from":{"id":777,"is_bot":true},"chat":{"id":-100,"type":"supergroup"}}}}`,
			rd:   mention(adapters.ScopeAuto),
			skip: "not addressed",
		},
		{
			desc: "document alone in a dm",
			raw: `{"update_id":7,"message":{"message_id":11,"from":{"id":42},"chat":{"id":42,"type":"private"},` +
				`"document":{"file_id":"doc1","file_name":"notes.txt","mime_type":"text/plain","file_size":12}}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:42", Sender: "42", MessageID: "42:11",
				Attachments: []sessions.Attachment{{Name: "notes.txt", MIME: "text/plain", Size: 12, Kind: sessions.AttachDocument, PlatformID: "doc1"}},
				Meta:        map[string]string{MetaMessageID: "11", MetaChatType: "private"}},
		},
		{
			desc: "a voice note has a name of its own",
			raw: `{"update_id":7,"message":{"message_id":12,"from":{"id":42},"chat":{"id":42,"type":"private"},` +
				`"voice":{"file_id":"v1","file_unique_id":"uv1","duration":3,"mime_type":"audio/ogg","file_size":5000}}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:42", Sender: "42", MessageID: "42:12",
				Attachments: []sessions.Attachment{{Name: "voice-12.ogg", MIME: "audio/ogg", Size: 5000, Kind: sessions.AttachVoice, PlatformID: "v1"}},
				Meta:        map[string]string{MetaMessageID: "12", MetaChatType: "private"}},
		},
		{
			desc: "an image sent as a file is an image; audio without a name or type gets both",
			raw: `{"update_id":7,"message":{"message_id":13,"from":{"id":42},"chat":{"id":42,"type":"private"},"caption":"look",` +
				`"document":{"file_id":"d2","file_name":"Scan.PNG","file_size":900},"audio":{"file_id":"a1","duration":60}}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:42", Sender: "42", MessageID: "42:13", Text: "look",
				Attachments: []sessions.Attachment{
					{Name: "audio-13.mp3", MIME: "audio/mpeg", Kind: sessions.AttachAudio, PlatformID: "a1"},
					{Name: "Scan.PNG", MIME: "image/png", Size: 900, Kind: sessions.AttachImage, PlatformID: "d2"},
				},
				Meta: map[string]string{MetaMessageID: "13", MetaChatType: "private"}},
		},
		{
			desc: "an unknown forward origin does not hide the text",
			raw: `{"update_id":8,"message":{"message_id":12,"from":{"id":42},"chat":{"id":42,"type":"private"},"text":"fwd",` +
				`"forward_origin":{"type":"something_new","date":1}}}`,
			rd: mention(adapters.ScopeAuto),
			want: sessions.Inbound{Conv: "telegram:42", Sender: "42", MessageID: "42:12", Text: "fwd",
				Meta: map[string]string{MetaMessageID: "12", MetaChatType: "private"}},
		},
		{desc: "edited message", raw: `{"update_id":9,"edited_message":{"message_id":1}}`, rd: mention(""), skip: "not a new message"},
		{desc: "channel post chat", raw: `{"update_id":10,"message":{"message_id":1,"chat":{"id":-5,"type":"channel"},"text":"x"}}`, rd: mention(""), skip: "channel"},
		{desc: "anonymous admin", raw: `{"update_id":11,"message":{"message_id":1,"chat":{"id":-5,"type":"group"},"sender_chat":{"id":-5},"text":"x"}}`, rd: mention(""), skip: "no sender"},
		{desc: "from a bot", raw: `{"update_id":12,"message":{"message_id":1,"from":{"id":9,"is_bot":true},"chat":{"id":9,"type":"private"},"text":"x"}}`, rd: mention(""), skip: "bot"},
		{desc: "sticker", raw: `{"update_id":13,"message":{"message_id":1,"from":{"id":9},"chat":{"id":9,"type":"private"},"sticker":{"file_id":"s"}}}`, rd: mention(""), skip: "nothing herald reads"},
		{desc: "command for another bot in a dm", raw: `{"update_id":14,"message":{"message_id":1,"from":{"id":9},"chat":{"id":9,"type":"private"},"text":"/new@other_bot"}}`, rd: mention(""), skip: "another bot"},
		{desc: "mention with offsets past the text", raw: `{"update_id":15,"message":{"message_id":1,"from":{"id":9},"chat":{"id":-9,"type":"group"},"text":"hi","entities":[{"type":"mention","offset":1,"length":99}]}}`, rd: mention(""), skip: "not addressed"},
		{desc: "message of the wrong type", raw: `{"update_id":16,"message":"text"}`, rd: mention(""), skip: "unreadable"},
		{
			desc: "press of an old message, per user in a group",
			raw: `{"update_id":17,"callback_query":{"id":"cb9","from":{"id":42,"username":"ann"},` +
				`"message":{"message_id":5,"date":0,"chat":{"id":-100,"type":"supergroup"}},"data":"/deny ap_1"}}`,
			rd: mention(adapters.ScopePerUser),
			want: sessions.Inbound{Conv: "telegram:-100:user:42", Sender: "42", MessageID: "press:cb9", Text: "/deny ap_1",
				Meta: map[string]string{MetaChatType: "supergroup", sessions.MetaTarget: "telegram:-100", sessions.MetaPressed: "5"}},
			user: "ann",
		},
		{desc: "press of an inline message", raw: `{"update_id":18,"callback_query":{"id":"cb1","from":{"id":42},"inline_message_id":"x","data":"d"}}`, rd: mention(""), skip: "inline message"},
		{desc: "press without data", raw: `{"update_id":19,"callback_query":{"id":"cb1","from":{"id":42},"message":{"message_id":5,"chat":{"id":42,"type":"private"}},"game_short_name":"g"}}`, rd: mention(""), skip: "without data"},
		{desc: "press in a channel", raw: `{"update_id":20,"callback_query":{"id":"cb1","from":{"id":42},"message":{"message_id":5,"chat":{"id":-5,"type":"channel"}},"data":"d"}}`, rd: mention(""), skip: "channel"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := parseUpdate([]byte(tc.raw), tc.rd)
			if err != nil {
				t.Fatalf("parseUpdate: %v", err)
			}
			if tc.skip != "" {
				if !strings.Contains(p.Skip, tc.skip) {
					t.Errorf("skip %q, want one saying %q", p.Skip, tc.skip)
				}
				return
			}
			if p.Skip != "" {
				t.Fatalf("skipped: %s", p.Skip)
			}
			if diff := cmp.Diff(tc.want, p.In); diff != "" {
				t.Errorf("inbound (-want +got):\n%s", diff)
			}
			if p.UserName != tc.user {
				t.Errorf("user name %q, want %q", p.UserName, tc.user)
			}
		})
	}
}

func TestParseUpdateRefusesNonUpdates(t *testing.T) {
	for _, raw := range []string{``, `[]`, `{"message":{}}`, `{"update_id":"1"}`, `not json`} {
		if _, err := parseUpdate([]byte(raw), mention("")); err == nil {
			t.Errorf("%q parsed", raw)
		}
	}
}

// FuzzParseUpdate feeds parseUpdate arbitrary updates: it never panics,
// and what it delivers is a well-formed Telegram inbound.
func FuzzParseUpdate(f *testing.F) {
	seeds := []string{
		`{"update_id":1,"message":{"message_id":5,"from":{"id":42,"username":"ann"},"chat":{"id":42,"type":"private"},"text":"hi"}}`,
		`{"update_id":2,"message":{"message_id":6,"from":{"id":42},"chat":{"id":-100,"type":"supergroup"},"text":"🚀 @herald_bot go","entities":[{"type":"mention","offset":3,"length":11}]}}`,
		`{"update_id":3,"message":{"message_id":7,"from":{"id":42},"chat":{"id":-100,"type":"group"},"text":"@herald_bot","entities":[{"type":"mention","offset":0,"length":11}]}}`,
		`{"update_id":4,"message":{"message_id":8,"message_thread_id":3,"is_topic_message":true,"from":{"id":42},"chat":{"id":-100,"type":"supergroup"},"caption":"/review@herald_bot x","photo":[{"file_id":"a"}]}}`,
		`{"update_id":5,"message":{"message_id":9,"from":{"id":42},"chat":{"id":-1,"type":"group"},"text":"x","reply_to_message":{"message_id":1,"from":{"id":777}}}}`,
		`{"update_id":6,"message":{"message_id":1,"from":{"id":9},"chat":{"id":-9,"type":"group"},"text":"a😀b","entities":[{"type":"mention","offset":-1,"length":3},{"type":"mention","offset":2,"length":1}]}}`,
		`{"update_id":7,"edited_message":{}}`,
		`{"update_id":8,"message":null}`,
		`{"update_id":9}`,
		`{}`,
		`{"update_id":10,"callback_query":{"id":"cb1","from":{"id":42},"message":{"message_id":5,"message_thread_id":3,"is_topic_message":true,"chat":{"id":-100,"type":"supergroup"}},"data":"/approve once ap_1"}}`,
	}
	for i, s := range seeds {
		f.Add([]byte(s), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, raw []byte, all bool) {
		rd := mention(adapters.ScopeAuto)
		if all {
			rd.trigger = config.TriggerAll
		}
		p, err := parseUpdate(raw, rd)
		if err != nil || p.Skip != "" {
			return
		}
		in := p.In
		if !strings.HasPrefix(in.Conv, "telegram:") || chat.ValidateConv("fuzz", in.Conv) != nil {
			t.Errorf("conversation key %q", in.Conv)
		}
		idPrefix := strings.Split(in.Conv, ":")[1] + ":"
		if _, pressed := in.Meta[sessions.MetaPressed]; pressed {
			idPrefix = adapters.PressPrefix
		}
		if in.Sender == "" || in.MessageID == "" || !strings.HasPrefix(in.MessageID, idPrefix) {
			t.Errorf("sender %q, message id %q in %q", in.Sender, in.MessageID, in.Conv)
		}
		if !utf8.ValidString(in.Text) {
			t.Errorf("text %q is not UTF-8", in.Text)
		}
		if strings.TrimSpace(in.Text) == "" && len(in.Attachments) == 0 {
			t.Error("an inbound with neither text nor files")
		}
		if target := in.Meta[sessions.MetaTarget]; target != "" && !strings.HasPrefix(in.Conv, target+":user:") {
			t.Errorf("target %q for conversation %q", target, in.Conv)
		}
	})
}
