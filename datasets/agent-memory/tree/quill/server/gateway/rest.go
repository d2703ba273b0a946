package gateway

import (
	"net/http"

	"connectrpc.com/vanguard"
)

// NewREST transcodes /api/v1 REST+JSON calls to the Connect services using the
// google.api.http annotations in proto/quill/v1. First-party clients keep using Connect.
func NewREST(services ...*vanguard.Service) (http.Handler, error) {
	tc, err := vanguard.NewTranscoder(services)
	if err != nil {
		return nil, err
	}
	return http.StripPrefix("/api/v1", withAPIKeyLimit(tc, 600)), nil
}
