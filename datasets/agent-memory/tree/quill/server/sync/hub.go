package sync

import (
	"context"
	"time"
)

// Compaction thresholds. Raised in May 2026: at 500 updates hot docs compacted every ~40 s.
const (
	compactMaxUpdates = 2000
	compactMaxBytes   = 4 << 20 // 4 MiB
	maxDocBytes       = 16 << 20
	// Updates are batched into one Turso write per window (write amplification, QUILL-1650).
	batchWindow = 250 * time.Millisecond
	// ALB idle timeout is 300 s; ping well inside it so idle sync streams survive.
	keepaliveEvery = 25 * time.Second
)

// flushLoop persists batched updates and compacts off the hot path.
func (h *Hub) flushLoop(ctx context.Context, doc *Doc) {
	ticker := time.NewTicker(batchWindow)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			h.flushBatch(ctx, doc)
			if doc.pendingUpdates > compactMaxUpdates || doc.pendingBytes > compactMaxBytes {
				h.compact(ctx, doc)
			}
		}
	}
}

func (h *Hub) keepalive(ctx context.Context, s *Session) {
	t := time.NewTicker(keepaliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.Send(pingFrame)
		}
	}
}
