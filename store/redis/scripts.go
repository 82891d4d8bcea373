package redis

import (
	"embed"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// Each script is lua/lib.lua, the lib_*.lua helpers it uses and its own
// file, loaded once at Open and run with EVALSHA (EVAL again when the
// server forgot it).
var (
	scriptAppend  = loadScript("append", "lib_queue")
	scriptClaim   = loadScript("claim", "lib_queue")
	scriptNext    = loadScript("next", "lib_queue")
	scriptRenew   = loadScript("renew", "lib_queue")
	scriptRelease = loadScript("release", "lib_queue")
	scriptFinish  = loadScript("finish", "lib_queue", "lib_outbox")
	scriptHistory = loadScript("history")

	scriptTimelineAppend = loadScript("timeline_append")
	scriptSignal         = loadScript("signal")
	scriptNoteAdd        = loadScript("note_add")

	scriptObEnqueue = loadScript("ob_enqueue", "lib_outbox")
	scriptObClaim   = loadScript("ob_claim", "lib_outbox")
	scriptObAck     = loadScript("ob_ack", "lib_outbox")
	scriptObRelease = loadScript("ob_release", "lib_outbox")
	scriptObDead    = loadScript("ob_dead", "lib_outbox")
	scriptObRequeue = loadScript("ob_requeue", "lib_outbox")
	scriptObList    = loadScript("ob_list", "lib_outbox")
)

// sources keeps each script's text so Open can load them all in one
// pipeline.
var sources = map[*goredis.Script]string{}

var allScripts = []*goredis.Script{
	scriptAppend, scriptClaim, scriptNext, scriptRenew, scriptRelease, scriptFinish, scriptHistory,
	scriptTimelineAppend, scriptSignal, scriptNoteAdd,
	scriptObEnqueue, scriptObClaim, scriptObAck, scriptObRelease, scriptObDead, scriptObRequeue, scriptObList,
}

func loadScript(name string, helpers ...string) *goredis.Script {
	var src strings.Builder
	for _, f := range append(append([]string{"lib"}, helpers...), name) {
		b, err := luaFS.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(err)
		}
		src.Write(b)
		src.WriteString("\n")
	}
	s := goredis.NewScript(src.String())
	sources[s] = src.String()
	return s
}
