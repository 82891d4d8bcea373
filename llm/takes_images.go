package llm

import (
	"strings"
)

// TakesImages reports whether model is known to take images as input.
// It is a heuristic over the model's name, not a question to the
// provider: the families below take images, and anything else (a local
// model under a name of its own, a family added since) is taken to be
// text-only. agent.image_input_mode auto uses it to choose between
// showing a picture and having it described; a deployment that knows
// better sets native or text.
//
// The name is read without case, after the last "/" (a router's
// "openai/gpt-4o", a hub's "Qwen/Qwen2.5-VL-7B-Instruct") and before a
// ":" tag (Ollama's "llava:13b").
func TakesImages(model string) bool {
	name := strings.ToLower(strings.TrimSpace(model))
	name = name[strings.LastIndex(name, "/")+1:]
	if i := strings.Index(name, ":"); i >= 0 {
		name = name[:i]
	}
	if name == "" {
		return false
	}
	for _, s := range imageMarks {
		if strings.Contains(name, s) {
			return true
		}
	}
	for _, p := range textOnlyPrefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	for _, p := range imagePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// imageMarks appear anywhere in the names of vision variants, of any
// family: qwen2.5-vl, qwen-vl-max, llama-3.2-11b-vision, grok-2-vision,
// gemini-pro-vision, phi-4-multimodal, qwen2.5-omni.
var imageMarks = []string{"-vl", "vision", "multimodal", "omni"}

// textOnlyPrefixes are members of image-taking families that take text
// only; they are checked before imagePrefixes.
var textOnlyPrefixes = []string{
	"o1-mini", "o1-preview", "o3-mini",
	"gpt-4o-audio", "gpt-4o-realtime", "gpt-4o-transcribe", "gpt-4o-mini-audio",
	"gpt-4o-mini-realtime", "gpt-4o-mini-transcribe", "gpt-4o-mini-tts",
	"claude-2", "claude-instant", "claude-1",
	"gemini-1.0-pro", // gemini-1.0-pro-vision has a mark
	"gemma-3-1b", "gemma3-1b",
}

// imagePrefixes start the names of families that take images.
var imagePrefixes = []string{
	// OpenAI
	"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-4-turbo", "gpt-5",
	"o1", "o3", "o4",
	// Anthropic: every Claude from 3 on (claude-3-5-sonnet,
	// claude-sonnet-4-5, claude-opus-4-1, claude-haiku-4-5, …)
	"claude-",
	// Google
	"gemini", "gemma-3", "gemma3",
	// Mistral
	"pixtral", "mistral-small-3.1", "mistral-small-3.2", "mistral-medium-3",
	// Meta
	"llama-4", "llama4",
	// xAI
	"grok-4",
	// open vision models
	"llava", "bakllava", "moondream", "minicpm-v", "qvq", "glm-4v", "glm-4.1v", "glm-4.5v",
}
