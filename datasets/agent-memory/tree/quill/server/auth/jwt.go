package auth

import (
	"crypto/ed25519"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	accessTTL  = 10 * time.Minute
	refreshTTL = 30 * 24 * time.Hour
	issuer     = "https://api.quill.app"
	// Tolerate small clock skew on desktop clients (QUILL-1502).
	leeway = 30 * time.Second
)

func (s *Signer) Access(userID, tokenID string) (string, error) {
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{
		Issuer:    issuer,
		Subject:   userID,
		ID:        tokenID,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(accessTTL)),
	})
	// kid lets verifiers pick the key from the JWKS during the 90-day rotation overlap.
	t.Header["kid"] = s.kid
	return t.SignedString(ed25519.PrivateKey(s.key))
}
