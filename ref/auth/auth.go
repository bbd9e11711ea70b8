// Package auth mints and verifies the lab's bearer tokens: JWTs signed with
// HS256 under the lab secret (IMLAB_SECRET), carrying the claims uid (a JSON
// number, 1..model.MaxUID) and did (the device id, a non-empty string of at
// most model.MaxDeviceIDLen visible ASCII bytes).
//
// Verification is strict: the algorithm is pinned to HS256 (so "none" and
// every other algorithm are refused), uid must be an unsigned integer number
// (not a string, not a fraction, not an exponent), did must be present and
// well formed, and exp and nbf are honoured when present. Every refusal wraps
// model.ErrUnauthorized; a bad Mint argument wraps model.ErrInvalid.
//
// The package knows nothing about HTTP: ref/api extracts the token from the
// Authorization header and calls Verify.
package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"imlab/ref/model"
)

// Named limits.
const (
	// MinSecretLen is the shortest accepted HS256 secret, in bytes.
	MinSecretLen = 16
	// MaxTokenLen bounds a token before it is parsed at all.
	MaxTokenLen = 2048
	// Algorithm is the only accepted signing algorithm.
	Algorithm = "HS256"
)

// DevSecret is the well-known secret used by the laptop commands (imlab up,
// imlab token) when IMLAB_SECRET is unset. Anyone can mint tokens for it:
// the commands print a warning whenever it is in use.
const DevSecret = "imlab-lab-secret-do-not-use-outside-the-lab"

// Config holds the secret and the clock tolerance.
type Config struct {
	// Secret is the HS256 key (IMLAB_SECRET), at least MinSecretLen bytes.
	Secret string
	// Leeway tolerates clock skew when checking exp, nbf and iat.
	Leeway time.Duration
	// Now is the clock (time.Now when nil); tests set it.
	Now func() time.Time
	// CacheSize bounds the verified-token cache (0 disables it). A token
	// seen before is answered from the cache without re-parsing; every hit
	// checks the time window the parser checked (exp, nbf, iat, with the
	// leeway, the same bounds), so the cache never accepts a token Verify
	// would refuse at that instant. When full, the cache is emptied.
	CacheSize int
}

// DefaultConfig returns a config without a secret (which Validate refuses)
// and a 30 s leeway.
func DefaultConfig() Config {
	return Config{Leeway: 30 * time.Second, CacheSize: 1 << 16}
}

// Validate checks the secret and the leeway.
func (c Config) Validate() error {
	if len(c.Secret) < MinSecretLen {
		return fmt.Errorf("%w: auth secret must be at least %d bytes (set IMLAB_SECRET)", model.ErrInvalid, MinSecretLen)
	}
	if c.Leeway < 0 || c.Leeway > 10*time.Minute {
		return fmt.Errorf("%w: auth leeway must be in 0..10m", model.ErrInvalid)
	}
	if c.CacheSize < 0 || c.CacheSize > 1<<22 {
		return fmt.Errorf("%w: auth cache size must be in 0..%d", model.ErrInvalid, 1<<22)
	}
	return nil
}

// Authority mints and verifies tokens under one secret. It is safe for
// concurrent use and holds no mutable state.
type Authority struct {
	key    []byte
	now    func() time.Time
	leeway time.Duration
	parser *jwt.Parser

	cacheMax int
	mu       sync.RWMutex
	cache    map[string]verified
}

// verified is a cached Verify answer and the window in which the parser
// accepts the token: from notBefore (the later of nbf and iat, less the
// leeway; zero without either) up to, not including, expires (exp plus
// the leeway; zero without exp).
type verified struct {
	uid       uint64
	did       string
	notBefore time.Time
	expires   time.Time
}

// check refuses a cached token outside its window, with the words the
// parser's refusal would have.
func (v verified) check(now time.Time) error {
	if !v.expires.IsZero() && !now.Before(v.expires) {
		return fmt.Errorf("%w: token expired", model.ErrUnauthorized)
	}
	if !v.notBefore.IsZero() && now.Before(v.notBefore) {
		return fmt.Errorf("%w: token not valid yet", model.ErrUnauthorized)
	}
	return nil
}

// New builds an Authority from a validated config.
func New(cfg Config) (*Authority, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{Algorithm}),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(now),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
	)
	a := &Authority{key: []byte(cfg.Secret), now: now, leeway: cfg.Leeway, parser: p, cacheMax: cfg.CacheSize}
	if a.cacheMax > 0 {
		a.cache = make(map[string]verified)
	}
	return a, nil
}

// claims is the token body. UID is kept raw so that a string or a fraction
// is refused instead of being coerced.
type claims struct {
	UID json.RawMessage `json:"uid"`
	DID *string         `json:"did"`
	jwt.RegisteredClaims
}

type mintClaims struct {
	UID uint64 `json:"uid"`
	DID string `json:"did"`
	jwt.RegisteredClaims
}

// Mint signs a token for (uid, did). ttl > 0 sets exp = now + ttl; ttl == 0
// mints a token without exp (a lab convenience; Verify accepts it).
func (a *Authority) Mint(uid uint64, did string, ttl time.Duration) (string, error) {
	if err := checkUID(uid); err != nil {
		return "", fmt.Errorf("%w: %v", model.ErrInvalid, err)
	}
	if err := CheckDeviceID(did); err != nil {
		return "", fmt.Errorf("%w: %v", model.ErrInvalid, err)
	}
	if ttl < 0 {
		return "", fmt.Errorf("%w: negative ttl", model.ErrInvalid)
	}
	now := a.now()
	c := mintClaims{UID: uid, DID: did}
	c.IssuedAt = jwt.NewNumericDate(now)
	if ttl > 0 {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.key)
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	return s, nil
}

// Verify checks a token and returns its uid and did. Every failure wraps
// model.ErrUnauthorized and says why without echoing the token.
func (a *Authority) Verify(token string) (uid uint64, did string, err error) {
	if token == "" {
		return 0, "", fmt.Errorf("%w: empty token", model.ErrUnauthorized)
	}
	if len(token) > MaxTokenLen {
		return 0, "", fmt.Errorf("%w: token longer than %d bytes", model.ErrUnauthorized, MaxTokenLen)
	}
	if a.cache != nil {
		a.mu.RLock()
		v, ok := a.cache[token]
		a.mu.RUnlock()
		if ok {
			if err := v.check(a.now()); err != nil {
				return 0, "", err
			}
			return v.uid, v.did, nil
		}
	}
	return a.verify(token)
}

// VerifyBytes is Verify of a token held in a byte slice (a request
// header): a token in the cache is answered without copying it to a
// string.
func (a *Authority) VerifyBytes(token []byte) (uid uint64, did string, err error) {
	if a.cache != nil && len(token) > 0 && len(token) <= MaxTokenLen {
		a.mu.RLock()
		v, ok := a.cache[string(token)]
		a.mu.RUnlock()
		if ok {
			if err := v.check(a.now()); err != nil {
				return 0, "", err
			}
			return v.uid, v.did, nil
		}
	}
	return a.Verify(string(token))
}

// verify parses and checks a token that is not in the cache, and caches
// it when it is accepted.
func (a *Authority) verify(token string) (uid uint64, did string, err error) {
	var c claims
	_, err = a.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodHS256 {
			return nil, errors.New("unexpected signing method")
		}
		return a.key, nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s", model.ErrUnauthorized, reason(err))
	}
	uid, err = parseUID(c.UID)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", model.ErrUnauthorized, err)
	}
	if c.DID == nil {
		return 0, "", fmt.Errorf("%w: claim did missing", model.ErrUnauthorized)
	}
	if err := CheckDeviceID(*c.DID); err != nil {
		return 0, "", fmt.Errorf("%w: %v", model.ErrUnauthorized, err)
	}
	if a.cache != nil {
		v := verified{uid: uid, did: *c.DID}
		if c.ExpiresAt != nil {
			v.expires = c.ExpiresAt.Add(a.leeway)
		}
		for _, t := range []*jwt.NumericDate{c.NotBefore, c.IssuedAt} {
			if t != nil && (v.notBefore.IsZero() || t.Add(-a.leeway).After(v.notBefore)) {
				v.notBefore = t.Add(-a.leeway)
			}
		}
		a.mu.Lock()
		if len(a.cache) >= a.cacheMax {
			clear(a.cache)
		}
		a.cache[token] = v
		a.mu.Unlock()
	}
	return uid, *c.DID, nil
}

// reason turns a jwt error into a short, stable explanation.
func reason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "bad signature or algorithm (HS256 required)"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token not valid yet"
	default:
		return "invalid token"
	}
}

func parseUID(raw json.RawMessage) (uint64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New("claim uid missing")
	}
	if raw[0] < '0' || raw[0] > '9' {
		return 0, errors.New("claim uid must be a positive integer number")
	}
	uid, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("claim uid must be a positive integer number")
	}
	if err := checkUID(uid); err != nil {
		return 0, err
	}
	return uid, nil
}

func checkUID(uid uint64) error {
	if uid == 0 || uid > model.MaxUID {
		return fmt.Errorf("uid must be in 1..%d", model.MaxUID)
	}
	return nil
}

// CheckDeviceID checks a device id: 1..model.MaxDeviceIDLen bytes of visible
// ASCII (0x21..0x7e), so it fits sync_cursor.device_id and a Redis key.
func CheckDeviceID(did string) error {
	if did == "" {
		return errors.New("did must not be empty")
	}
	if len(did) > model.MaxDeviceIDLen {
		return fmt.Errorf("did longer than %d bytes", model.MaxDeviceIDLen)
	}
	for i := 0; i < len(did); i++ {
		if did[i] < 0x21 || did[i] > 0x7e {
			return errors.New("did must be visible ASCII without spaces")
		}
	}
	return nil
}
