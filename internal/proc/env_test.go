package proc

import (
	"slices"
	"testing"
)

func TestEnvBuild(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/h", "LC_ALL=C", "TERM=xterm",
		"HERALD_API_KEY=api-key-1111", "TELEGRAM_BOT_TOKEN=tg-2222", "REDIS_URL=redis://:pw-3333@h",
		"GITHUB_TOKEN=gh-4444", "AWS_SECRET_ACCESS_KEY=aws-5555", "MY_TOOL_HOME=/opt/tool",
		"COPY_OF_KEY=sk-model-6666", "LC_AUTH_OF_ALL=x", "SSH_AUTH_SOCK=/tmp/agent",
		"GOPATH=/go", "ODD",
	}
	for _, tc := range []struct {
		desc       string
		env        *Env
		given      []string
		want, lack []string
	}{
		{
			desc: "nil: the base set alone",
			env:  nil,
			want: []string{"PATH=/usr/bin", "HOME=/home/h", "LC_ALL=C", "TERM=xterm"},
			lack: []string{"HERALD_API_KEY=api-key-1111", "GOPATH=/go", "MY_TOOL_HOME=/opt/tool", "LC_AUTH_OF_ALL=x"},
		},
		{
			desc: "passthrough adds names; a credential's name only when named",
			env: &Env{
				Passthrough: []string{"GOPATH", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "HERALD_API_KEY", "REDIS_URL", "COPY_OF_KEY"},
				Withheld:    []string{"HERALD_API_KEY", "REDIS_URL"},
				Secrets:     []string{"sk-model-6666", "pw-3333"},
			},
			want: []string{"GOPATH=/go", "GITHUB_TOKEN=gh-4444", "SSH_AUTH_SOCK=/tmp/agent", "PATH=/usr/bin"},
			lack: []string{"HERALD_API_KEY=api-key-1111", "REDIS_URL=redis://:pw-3333@h", "COPY_OF_KEY=sk-model-6666",
				"AWS_SECRET_ACCESS_KEY=aws-5555", "TELEGRAM_BOT_TOKEN=tg-2222", "MY_TOOL_HOME=/opt/tool"},
		},
		{
			desc:  "given variables are kept as given, after the inherited",
			env:   &Env{Withheld: []string{"HERALD_KANBAN_TOKEN"}},
			given: []string{"HERALD_KANBAN_TOKEN=card-token", "PATH=/lane/bin"},
			want:  []string{"HERALD_KANBAN_TOKEN=card-token", "PATH=/lane/bin"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.env != nil {
				tc.env.Environ = func() []string { return environ }
			} else {
				t.Setenv("PATH", "/usr/bin")
				t.Setenv("HOME", "/home/h")
				t.Setenv("LC_ALL", "C")
				t.Setenv("TERM", "xterm")
				t.Setenv("HERALD_API_KEY", "api-key-1111")
				t.Setenv("GOPATH", "/go")
				t.Setenv("MY_TOOL_HOME", "/opt/tool")
				t.Setenv("LC_AUTH_OF_ALL", "x")
			}
			got := tc.env.Build(tc.given...)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("lacks %s: %q", w, got)
				}
			}
			for _, l := range tc.lack {
				if slices.Contains(got, l) {
					t.Errorf("has %s: %q", l, got)
				}
			}
			if n := len(tc.given); n > 0 && !slices.Equal(got[len(got)-n:], tc.given) {
				t.Errorf("the given variables are not last: %q", got)
			}
		})
	}
}
