package config_test

import (
	"slices"
	"testing"

	"github.com/heraldgw/herald/config"
)

func TestSecrets(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP.APIKey = "api-key-1111"
	cfg.Model.APIKey = "sk-model-2222"
	cfg.Model.BaseURL = "https://models.example/v1?api_key=q%2Fkey3333&region=eu"
	cfg.Store.RedisURL = "redis://default:p%40ss4444@cache:6379/0"
	cfg.Platforms.Telegram.Token = "12345:tg5555"
	cfg.Platforms.Slack.APIURL = "https://tok6666@slack.example/api"
	cfg.Platforms.Discord.APIURL = "https://discord.example/api#frag7777"
	cfg.Model.Credentials = []config.Credential{{Key: "sk-pool-8888", Label: "team"}}
	cfg.Model.Fallbacks = []config.Fallback{{BaseURL: "https://fb.example", APIKey: "sk-fb-9999", Credentials: []config.Credential{{Key: "sk-fbpool-0000"}}}}

	got := cfg.Secrets()
	for _, want := range []string{
		"api-key-1111", "sk-model-2222", "q%2Fkey3333", "q/key3333", "p%40ss4444", "p@ss4444",
		"12345:tg5555", "tok6666", "frag7777", "sk-pool-8888", "sk-fb-9999", "sk-fbpool-0000",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets lacks %q; got %q", want, got)
		}
	}
	for _, notSecret := range []string{"default", "eu", "cache:6379", config.DefaultHTTPAddr, "team"} {
		if slices.Contains(got, notSecret) {
			t.Errorf("Secrets has %q, which is not a secret", notSecret)
		}
	}
}

func TestSecretVariables(t *testing.T) {
	got := config.SecretVariables()
	for _, want := range []string{
		"HERALD_API_KEY", "HERALD_MODEL_API_KEY", "HERALD_MODEL_API_KEYS", "OPENAI_API_KEY", "REDIS_URL",
		"TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "DISCORD_BOT_TOKEN",
		"DELEGATION_API_KEY", "HERALD_MODEL_BASE_URL",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretVariables lacks %s: %q", want, got)
		}
	}
	for _, not := range []string{"HERALD_HOME", "HERALD_MODEL", "TELEGRAM_HOME_CHANNEL", "HERALD_TOOLS_WORKSPACE"} {
		if slices.Contains(got, not) {
			t.Errorf("SecretVariables has %s, which holds no secret", not)
		}
	}
}

func TestSecretsOfMCPServers(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", `
mcp_servers:
  github:
    command: gh-mcp
    env:
      GITHUB_TOKEN: ghp-literal-1111
      LOG_LEVEL: debug
      WORK: ${HOME}
      PAT: ${GH_PAT}
  search:
    url: https://search.example/mcp
    headers:
      Authorization: Bearer ${SEARCH_KEY}
      X-Region: europe
`)
	cfg, err := config.Load(path, envOf(map[string]string{"HOME": dir, "GH_PAT": "pat-2222", "SEARCH_KEY": "sk-3333"}))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Secrets()
	for _, want := range []string{"ghp-literal-1111", "pat-2222", "sk-3333"} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets lacks %q; got %q", want, got)
		}
	}
	for _, notSecret := range []string{"debug", dir, "europe", "Bearer ${SEARCH_KEY}"} {
		if slices.Contains(got, notSecret) {
			t.Errorf("Secrets has %q, which is not a secret", notSecret)
		}
	}
}
