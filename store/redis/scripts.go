package redis

import (
	"embed"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// Each script is lua/lib.lua followed by the script's own file, loaded
// once at Open and run with EVALSHA (EVAL again when the server forgot it).
var (
	scriptAppend  = loadScript("append")
	scriptClaim   = loadScript("claim")
	scriptNext    = loadScript("next")
	scriptRenew   = loadScript("renew")
	scriptRelease = loadScript("release")
	scriptFinish  = loadScript("finish")
	scriptHistory = loadScript("history")

	scriptObEnqueue = loadScript("ob_enqueue")
	scriptObClaim   = loadScript("ob_claim")
	scriptObAck     = loadScript("ob_ack")
	scriptObRelease = loadScript("ob_release")
	scriptObDead    = loadScript("ob_dead")
	scriptObRequeue = loadScript("ob_requeue")
	scriptObList    = loadScript("ob_list")
)

// sources keeps each script's text so Open can load them all in one
// pipeline.
var sources = map[*goredis.Script]string{}

var allScripts = []*goredis.Script{
	scriptAppend, scriptClaim, scriptNext, scriptRenew, scriptRelease, scriptFinish, scriptHistory,
	scriptObEnqueue, scriptObClaim, scriptObAck, scriptObRelease, scriptObDead, scriptObRequeue, scriptObList,
}

func loadScript(name string) *goredis.Script {
	lib, err := luaFS.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	src := string(lib) + "\n" + string(body)
	s := goredis.NewScript(src)
	sources[s] = src
	return s
}
