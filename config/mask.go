package config

import (
	"log/slog"
	"net/url"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/heraldgw/herald/internal/redact"
)

// Mask is what a secret is shown as, the redactor's mask: masked whole,
// since even a token's last characters help someone guessing which
// token it is.
const Mask = redact.Mask

// Masked returns a copy of c with every secret replaced by Mask (see the
// secret tags on Config), and the credential-looking values of a mapping
// tagged `secret:"keys"`. Unset secrets stay empty, so the output still
// tells set from unset.
func (c Config) Masked() Config {
	maskStruct(reflect.ValueOf(&c).Elem())
	return c
}

func maskStruct(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			maskStruct(f)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			if !f.IsNil() {
				// A new slice: the copy Masked returns shares the old one.
				c := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
				reflect.Copy(c, f)
				for j := range c.Len() {
					maskStruct(c.Index(j))
				}
				f.Set(c)
			}
		case f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.Struct:
			if !f.IsNil() {
				// mcp_servers: a new map of masked copies.
				c := reflect.MakeMapWithSize(f.Type(), f.Len())
				for it := f.MapRange(); it.Next(); {
					e := reflect.New(f.Type().Elem()).Elem()
					e.Set(it.Value())
					maskStruct(e)
					c.SetMapIndex(it.Key(), e)
				}
				f.Set(c)
			}
		case f.Kind() == reflect.Map && t.Field(i).Tag.Get("secret") == "values":
			if !f.IsNil() {
				// An MCP server's env and headers: every value may be a
				// credential, so every one is masked.
				c := reflect.MakeMapWithSize(f.Type(), f.Len())
				for it := f.MapRange(); it.Next(); {
					c.SetMapIndex(it.Key(), reflect.ValueOf(Mask))
				}
				f.Set(c)
			}
		case f.Type() == freeMapType && t.Field(i).Tag.Get("secret") == "keys":
			if !f.IsNil() {
				// A new map: the copy Masked returns shares the old one.
				f.Set(reflect.ValueOf(maskKeys(f.Interface().(map[string]any))))
			}
		case f.Kind() != reflect.String || f.String() == "":
		case t.Field(i).Tag.Get("secret") == "true":
			f.SetString(Mask)
		case t.Field(i).Tag.Get("secret") == "url":
			f.SetString(maskURL(f.String()))
		}
	}
}

// maskURL hides a URL's password and the values of query parameters that
// look like credentials. A URL that does not parse, or is not of the form
// scheme://…, is masked whole: there is no telling which part of it is
// secret ("user:password@host" parses as a scheme and an opaque rest, a
// token pasted into the wrong key as a path).
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Mask
	}
	if _, rest, _ := strings.Cut(raw, ":"); u.Scheme == "" || !strings.HasPrefix(rest, "//") {
		return Mask
	}
	// The user part is put back by hand because url.URL would escape the
	// mask's stars.
	userinfo := ""
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			userinfo = url.User(u.User.Username()).String() + ":" + Mask + "@"
		} else if u.User.Username() != "" {
			// A lone user part is often the credential itself
			// (https://TOKEN@host).
			userinfo = Mask + "@"
		}
		u.User = nil
	}
	if u.RawQuery != "" {
		// Edited by hand rather than through url.Values so the
		// rest of the query is shown exactly as written.
		parts := strings.Split(u.RawQuery, "&")
		for i, part := range parts {
			name, _, hasValue := strings.Cut(part, "=")
			if hasValue && secretParam(name) {
				parts[i] = name + "=" + Mask
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" {
		// Never sent to a server, so nothing herald needs to show; a
		// fragment in a configured URL is more likely a pasted token.
		u.Fragment = Mask
	}
	s := u.String()
	if userinfo != "" {
		s = strings.Replace(s, "//", "//"+userinfo, 1)
	}
	return s
}

// maskKeys returns a copy of m with the string values of
// credential-looking keys masked, at every depth: a mapping tagged
// `secret:"keys"` is free-form, and may carry a header's token.
func maskKeys(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok && s != "" && secretParam(k) {
			out[k] = Mask
			continue
		}
		out[k] = maskValue(v)
	}
	return out
}

func maskValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return maskKeys(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = maskValue(e)
		}
		return out
	}
	return v
}

func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, word := range []string{"pass", "secret", "token", "key", "auth", "sig", "cred"} {
		if strings.Contains(name, word) {
			return true
		}
	}
	return false
}

// MaskedYAML renders the masked config as YAML, every key shown: what
// `herald config check` prints.
func (c Config) MaskedYAML() ([]byte, error) {
	return yaml.Marshal(c.Masked())
}

// String is the masked YAML, so printing a Config with %v or %s never
// shows a secret.
func (c Config) String() string {
	b, err := c.MaskedYAML()
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}

// GoString keeps %#v as safe as %v.
func (c Config) GoString() string { return c.String() }

// LogValue keeps a Config handed to slog masked too.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
