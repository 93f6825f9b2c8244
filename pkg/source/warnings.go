package source

import (
	"context"

	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/rest"
)

// relayKey marks a context whose source requests relay their warnings (RelayWarnings).
type relayKey struct{}

// RelayWarnings returns ctx, the context of an API request the server is answering, marked so
// that the Warning headers the source answers to requests made with it (WarningHandler) become
// warnings of that answer (k8s.io/apiserver's warning.AddWarning, which the generic server
// writes as Warning headers): a status write through a view with fieldValidation=Warn then
// warns of unknown fields exactly as kube-apiserver warns of them for the same write made to it
// directly (docs/status.md).
func RelayWarnings(ctx context.Context) context.Context {
	return context.WithValue(ctx, relayKey{}, true)
}

// WarningHandler is the rest.WarningHandlerWithContext of the source's clients: a warning
// answered to a request made with a RelayWarnings context is added to that request's answer;
// every other warning is logged, as client-go's default (rest.WarningLogger) does.
type WarningHandler struct{}

var _ rest.WarningHandlerWithContext = WarningHandler{}

// HandleWarningHeaderWithContext relays or logs one warning (code 299, as client-go passes
// them; others are ignored, as rest.WarningLogger ignores them).
func (WarningHandler) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	if relay, _ := ctx.Value(relayKey{}).(bool); relay {
		warning.AddWarning(ctx, "", text)
		return
	}
	rest.WarningLogger{}.HandleWarningHeaderWithContext(ctx, code, agent, text)
}
