package api

import (
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

// 120 requests per minute per access token, burst 40. Keyed by token id (jti) so the
// desktop and web clients of one user no longer share a bucket (QUILL-1190).
var perToken = rate.Every(time.Minute / 120)

const burst = 40

func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := l.forKey(tokenID(r.Context()), perToken, burst)
		if !lim.Allow() {
			w.Header().Set("Retry-After", strconv.Itoa(1))
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}
