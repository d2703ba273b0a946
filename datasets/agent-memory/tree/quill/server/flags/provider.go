package flags

import (
	"context"
	"database/sql"

	"github.com/open-feature/go-sdk/openfeature"
)

// TursoProvider is an OpenFeature provider backed by the feature_flags table.
type TursoProvider struct{ db *sql.DB }

// killSwitches must resolve to false when the table is unreachable.
var killSwitches = map[string]bool{"sync-v2-protocol": true}

func (p *TursoProvider) BooleanEvaluation(ctx context.Context, flag string, def bool, ec openfeature.FlattenedContext) openfeature.BoolResolutionDetail {
	var on bool
	err := p.db.QueryRowContext(ctx, `SELECT enabled FROM feature_flags WHERE key = ?`, flag).Scan(&on)
	if err != nil {
		if killSwitches[flag] {
			def = false
		}
		return openfeature.BoolResolutionDetail{Value: def, ProviderResolutionDetail: openfeature.ProviderResolutionDetail{Reason: openfeature.ErrorReason}}
	}
	return openfeature.BoolResolutionDetail{Value: on}
}
