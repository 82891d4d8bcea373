package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
)

// secretsIn lists every secret-looking fragment planted by the tests below;
// none may appear in anything shown to a person.
var secretsIn = regexp.MustCompile(`(pw|sec|tok)-[a-z_.]+`)

// shown is every way a config gets shown: config check's YAML and the fmt
// and slog renderings.
func shown(t *testing.T, c config.Config) map[string]string {
	t.Helper()
	y, err := c.MaskedYAML()
	if err != nil {
		t.Fatalf("MaskedYAML: %v", err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("loaded", "config", c)
	return map[string]string{
		"MaskedYAML": string(y),
		"%v":         fmt.Sprintf("%v", c),
		"%+v":        fmt.Sprintf("%+v", c),
		"%#v":        fmt.Sprintf("%#v", c),
		"slog":       logged.String(),
	}
}

func TestMaskedHidesEverySecretFromTheEnvironment(t *testing.T) {
	// Every credential the contract names, set the way users set them.
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", `
platforms:
  telegram:
    mode: webhook
    webhook_url: https://hook:pw-webhook_url@bot.example/telegram?secret=sec-webhook.query
    webhook_secret: sec-webhook_secret
auxiliary:
  review:
    base_url: https://review:pw-review.base_url@review.example/v1
    api_key: sec-auxiliary.review.api_key
`)
	env := map[string]string{
		"HOME":                  dir,
		"REDIS_URL":             "redis://default:pw-redis_url@redis:6379/0",
		"HERALD_HTTP_ADDR":      "0.0.0.0:8642",
		"HERALD_API_KEY":        "sec-http.api_key",
		"HERALD_MODEL_BASE_URL": "https://tok-base_url.user@models.example/v1?api_key=sec-base_url.query",
		"HERALD_MODEL_API_KEY":  "sec-model.api_key",
		"TELEGRAM_BOT_TOKEN":    "tok-telegram.token",
		"TELEGRAM_API_URL":      "http://tg:pw-telegram.api_url@127.0.0.1:8081",
		"SLACK_BOT_TOKEN":       "tok-slack.bot_token",
		"SLACK_APP_TOKEN":       "tok-slack.app_token",
		"SLACK_SIGNING_SECRET":  "sec-slack.signing_secret",
		"SLACK_API_URL":         "http://127.0.0.1:8082/api/?token=tok-slack.api_url",
		"DISCORD_BOT_TOKEN":     "tok-discord.token",
		"DISCORD_API_URL":       "http://:pw-discord.api_url@127.0.0.1:8083/",
		"DELEGATION_BASE_URL":   "https://children.example/v1?key=sec-delegation.base_url",
		"DELEGATION_API_KEY":    "sec-delegation.api_key",
	}
	c, err := config.Load(path, envOf(env))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for name, out := range shown(t, c) {
		if leaks := secretsIn.FindAllString(out, -1); len(leaks) > 0 {
			t.Errorf("%s shows secrets %q:\n%s", name, leaks, out)
		}
	}
	y, _ := c.MaskedYAML()
	for _, want := range []string{"api_key: '****'", "default:****@redis:6379/0", "0.0.0.0:8642", "bot.example/telegram"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("MaskedYAML lacks %q; the rest of the config must stay readable:\n%s", want, y)
		}
	}
	if c.Platforms.Slack.BotToken != "tok-slack.bot_token" {
		t.Errorf("Masked changed the config it was called on")
	}
	m := c.Masked()
	if m.Delegation.APIKey != config.Mask || m.Auxiliary.Review.APIKey != config.Mask {
		t.Errorf("delegation.api_key %q, auxiliary.review.api_key %q; want both masked", m.Delegation.APIKey, m.Auxiliary.Review.APIKey)
	}
}

// TestMaskedRequestOverrides checks the free-form request_overrides: the
// string values of credential-looking keys are masked at every depth, the
// rest is shown as it is, and the config Masked was called on keeps its
// values.
func TestMaskedRequestOverrides(t *testing.T) {
	c, err := loadFile(t, `
delegation:
  request_overrides:
    temperature: 0.2
    max_tokens: 4096
    api_key: sec-overrides.api_key
    extra_headers:
      Authorization: Bearer tok-overrides.header
      X-Trace: plain-trace
    extra_body:
      providers: [{name: plain-provider, token: tok-overrides.list}]
`)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for name, out := range shown(t, c) {
		if leaks := secretsIn.FindAllString(out, -1); len(leaks) > 0 {
			t.Errorf("%s shows secrets %q:\n%s", name, leaks, out)
		}
		for _, want := range []string{"plain-trace", "plain-provider", "4096", "0.2"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
	}
	want := map[string]any{
		"temperature":   0.2,
		"max_tokens":    4096,
		"api_key":       config.Mask,
		"extra_headers": map[string]any{"Authorization": config.Mask, "X-Trace": "plain-trace"},
		"extra_body":    map[string]any{"providers": []any{map[string]any{"name": "plain-provider", "token": config.Mask}}},
	}
	if diff := cmp.Diff(want, c.Masked().Delegation.RequestOverrides); diff != "" {
		t.Errorf("masked request_overrides mismatch (-want +got):\n%s", diff)
	}
	headers, _ := c.Delegation.RequestOverrides["extra_headers"].(map[string]any)
	if headers["Authorization"] != "Bearer tok-overrides.header" {
		t.Errorf("Masked changed the config it was called on: %v", c.Delegation.RequestOverrides)
	}
}

// TestMaskedHidesEveryTaggedField fills every string field of Config,
// secret or not, and checks each secret field's value is gone from
// everything shown while the other values stay.
func TestMaskedHidesEveryTaggedField(t *testing.T) {
	var c config.Config
	var secret, plain []string
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			name := path + strings.ToLower(sf.Name)
			switch {
			case f.Kind() == reflect.Struct:
				fill(f, name+".")
			case f.Kind() != reflect.String || sf.Tag.Get("yaml") == "-":
			case sf.Tag.Get("secret") == "true":
				f.SetString("sec-" + name)
				secret = append(secret, "sec-"+name)
			case sf.Tag.Get("secret") == "url":
				f.SetString("https://u:pw-" + name + "@h.example/p?token=tok-" + name)
				secret = append(secret, "pw-"+name, "tok-"+name)
			default:
				f.SetString("plain-" + name)
				plain = append(plain, "plain-"+name)
			}
		}
	}
	fill(reflect.ValueOf(&c).Elem(), "")
	if len(secret) < 12 {
		t.Fatalf("only %d secret fragments planted; are the secret tags gone?", len(secret))
	}
	for name, out := range shown(t, c) {
		for _, s := range secret {
			if strings.Contains(out, s) {
				t.Errorf("%s shows secret %q", name, s)
			}
		}
		for _, p := range plain {
			if !strings.Contains(out, p) {
				t.Errorf("%s lacks plain value %q", name, p)
			}
		}
	}
}

// TestSecretFieldsAreTagged keeps a credential added later from being
// shown: a field named like one must carry a secret tag.
func TestSecretFieldsAreTagged(t *testing.T) {
	credential := regexp.MustCompile(`(?i)token|key|secret|password|url`)
	var check func(typ reflect.Type, path string)
	check = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if sf.Type.Kind() == reflect.Struct {
				check(sf.Type, path+sf.Name+".")
				continue
			}
			if sf.Type.Kind() == reflect.String && credential.MatchString(sf.Name) && sf.Tag.Get("secret") == "" {
				t.Errorf("%s%s looks like a credential but has no secret tag", path, sf.Name)
			}
		}
	}
	check(reflect.TypeFor[config.Config](), "")
}

func TestMaskURL(t *testing.T) {
	tests := []struct {
		desc string
		url  string
		want string
	}{
		{desc: "empty stays empty", url: "", want: ""},
		{desc: "no credentials", url: "redis://127.0.0.1:6379/0", want: "redis://127.0.0.1:6379/0"},
		{desc: "password only", url: "redis://:pw-x@h:6379/0", want: "redis://:****@h:6379/0"},
		{desc: "user and password", url: "rediss://default:pw-x@h:6380/1", want: "rediss://default:****@h:6380/1"},
		{desc: "escaped password", url: "redis://:p%40ss%2Fw@h/0", want: "redis://:****@h/0"},
		{desc: "user only is taken as a token", url: "https://tok-x@h/v1", want: "https://****@h/v1"},
		{desc: "credential query values", url: "https://h/v1?api_key=k&model=m&Token=t&x", want: "https://h/v1?api_key=****&model=m&Token=****&x"},
		{desc: "unix socket with password", url: "unix://:pw-x@/run/redis.sock?db=2", want: "unix://:****@/run/redis.sock?db=2"},
		{desc: "unparseable is masked whole", url: "redis://:pw-x@[::1", want: "****"},
		{desc: "no scheme, user and password, is masked whole", url: "default:pw-x@redis.internal:6379", want: "****"},
		{desc: "no scheme, password only, is masked whole", url: ":pw-x@h:6379", want: "****"},
		{desc: "a token in place of a URL is masked whole", url: "sk-live-x", want: "****"},
		{desc: "a scheme without // is masked whole", url: "redis:pw-x@h", want: "****"},
		{desc: "a scheme in capitals is kept", url: "REDIS://:pw-x@h:6379/0", want: "redis://:****@h:6379/0"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := config.Default()
			c.Store.RedisURL = tc.url
			if got := c.Masked().Store.RedisURL; got != tc.want {
				t.Errorf("masked %q = %q, want %q", tc.url, got, tc.want)
			}
		})
	}
}

func TestProblemsNeverQuoteSecrets(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", `
store:
  redis_url: "redis://:pw-redis@[::1"
http:
  addr: 0.0.0.0:1
model:
  base_url: "ftp://:pw-model@models/v1?key=sec-model"
  api_key: [sec-listed]
platforms:
  slack: tok-slack
  telegram:
    mode: webhook
    webhook_url: "bot:pw-hook@x"
    webhook_secret: "sec-has spaces!"
`)
	_, err := config.Load(path, envOf(map[string]string{"HOME": dir}))
	ps := problemsOf(t, err)
	if len(ps) < 5 {
		t.Fatalf("want a problem for each bad value, got %v", ps)
	}
	if leaks := secretsIn.FindAllString(err.Error(), -1); len(leaks) > 0 {
		t.Errorf("problems quote secrets %q: %v", leaks, err)
	}
}
