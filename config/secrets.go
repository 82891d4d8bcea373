package config

import (
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/heraldgw/herald/internal/proc"
)

// Secrets lists the secret values in c: every field tagged
// `secret:"true"`, the credentials inside fields tagged `secret:"url"`
// (password, a lone user part, credential-like query values), both as
// written and unescaped, since either form may turn up in an error, and
// and an MCP server's Secrets (the variables its env and headers name as
// Load found them, Referenced). The
// redactor replaces them in what leaves herald, and no process herald
// starts is given a variable that holds one.
func (c Config) Secrets() []string {
	var out []string
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := v.Field(i)
			if !t.Field(i).IsExported() {
				continue
			}
			switch {
			case f.Kind() == reflect.Struct:
				walk(f)
			case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
				// model.credentials, model.fallbacks
				for j := range f.Len() {
					walk(f.Index(j))
				}
			case f.Kind() != reflect.String || f.String() == "":
			case t.Field(i).Tag.Get("secret") == "true":
				out = append(out, f.String())
			case t.Field(i).Tag.Get("secret") == "url":
				out = append(out, urlSecrets(f.String())...)
			}
		}
	}
	walk(reflect.ValueOf(c))
	for _, srv := range c.MCPServers {
		out = append(out, srv.Secrets(func(string) (string, bool) { return "", false })...)
	}
	return append(out, c.Referenced...)
}

// urlSecrets returns the credentials in a URL. One that does not parse is
// a secret whole, as masking treats it.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return []string{raw}
	}
	var out []string
	add := func(escaped, plain string) {
		out = append(out, escaped)
		if plain != escaped {
			out = append(out, plain)
		}
	}
	if u.User != nil {
		written := u.User.String() // "user:pass" or "user", escaped
		if p, ok := u.User.Password(); ok {
			_, escaped, _ := strings.Cut(written, ":")
			add(escaped, p)
		} else if name := u.User.Username(); name != "" {
			// A lone user part is often the credential itself.
			add(written, name)
		}
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		name, value, ok := strings.Cut(part, "=")
		if !ok || value == "" || !secretParam(name) {
			continue
		}
		plain, err := url.QueryUnescape(value)
		if err != nil {
			plain = value
		}
		add(value, plain)
	}
	if u.Fragment != "" {
		add(u.EscapedFragment(), u.Fragment)
	}
	return out
}

// SecretVariables names the environment variables that set herald's
// secrets (those of the keys tagged secret, OPENAI_API_KEY and
// HERALD_MODEL_API_KEYS among them): no process herald starts is given
// one, whatever tools.env_passthrough says.
func SecretVariables() []string {
	names := []string{"OPENAI_API_KEY", "HERALD_MODEL_API_KEYS"}
	var c Config
	secret := secretFields(reflect.ValueOf(&c).Elem())
	for _, e := range envStrings {
		if slices.Contains(secret, e.field(&c)) {
			names = append(names, e.name)
		}
	}
	return names
}

// SubprocessEnv is how the environment of every process herald started
// with c runs is built (the terminal tool's commands, cron scripts,
// kanban lanes, completion checks): the base set and
// tools.env_passthrough, never a variable that sets one of herald's
// secrets or holds one of their values.
func (c Config) SubprocessEnv() *proc.Env {
	return &proc.Env{
		Passthrough: c.Tools.EnvPassthrough,
		Withheld:    SecretVariables(),
		Secrets:     c.Secrets(),
	}
}

// secretFields are the addresses of v's string fields tagged secret, at
// every depth of nested structs.
func secretFields(v reflect.Value) []*string {
	var out []*string
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		switch {
		case !t.Field(i).IsExported():
		case f.Kind() == reflect.Struct:
			out = append(out, secretFields(f)...)
		case f.Kind() == reflect.String && t.Field(i).Tag.Get("secret") != "":
			out = append(out, f.Addr().Interface().(*string))
		}
	}
	return out
}
