package gateway

import (
	"cmp"
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/llm"
)

// traceModel wraps c, whose calls run on model unless a request names
// another, so that each call is a herald.model span with the GenAI
// attributes: the model, the tokens and why the reply ended. What was
// said is never an attribute.
func traceModel(c llm.Client, model string) llm.Client {
	if c == nil {
		return nil
	}
	return &tracedModel{c: c, model: model}
}

// tracedModel is a client whose calls are spans. Its methods take a
// pointer, as the client interface holds it, so that no wrapper's frame
// copies it on the goroutine's stack while a call waits on the model.
type tracedModel struct {
	c     llm.Client
	model string
}

func (t *tracedModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	asked := cmp.Or(req.Model, t.model)
	ctx, span := startModelSpan(ctx, asked)
	resp, err := t.c.Complete(ctx, req)
	endModelSpan(span, asked, resp, err)
	return resp, err
}

// startModelSpan starts a model call's span. It and endModelSpan are
// apart from Complete so that their locals are off the goroutine's
// stack while the call waits on the model.
func startModelSpan(ctx context.Context, asked string) (context.Context, trace.Span) {
	return tracing.Start(ctx, tracing.SpanModel,
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", asked))
}

// endModelSpan records how the call asked of asked went, and ends span.
func endModelSpan(span trace.Span, asked string, resp *llm.Response, err error) {
	if err != nil {
		if class := llm.ClassOf(err); class != "" {
			span.SetAttributes(attribute.String("error.type", string(class)))
		}
	}
	if resp != nil {
		span.SetAttributes(
			attribute.String("gen_ai.response.model", cmp.Or(resp.Answered.Model, asked)),
			attribute.Int("gen_ai.usage.input_tokens", resp.Usage.PromptTokens),
			attribute.Int("gen_ai.usage.output_tokens", resp.Usage.CompletionTokens))
		if resp.FinishReason != "" {
			span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.FinishReason}))
		}
	}
	tracing.End(span, err)
}
