package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"imlab/ref/model"
)

const secret = "test-secret-0123456789abcdef"

func newAuth(t *testing.T, now func() time.Time) *Authority {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Secret = secret
	cfg.Now = now
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// rawToken signs an arbitrary header and payload with HMAC-SHA256, so tests
// can build tokens the library would never mint.
func rawToken(header, payload, key string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(m.Sum(nil))
}

func TestMintVerifyRoundTrip(t *testing.T) {
	a := newAuth(t, nil)
	for _, tc := range []struct {
		uid uint64
		did string
		ttl time.Duration
	}{
		{1, "phone", time.Hour},
		{model.MaxUID, strings.Repeat("d", model.MaxDeviceIDLen), 0},
		{42, "web:tab-1", time.Minute},
	} {
		tok, err := a.Mint(tc.uid, tc.did, tc.ttl)
		if err != nil {
			t.Fatalf("mint %d/%s: %v", tc.uid, tc.did, err)
		}
		uid, did, err := a.Verify(tok)
		if err != nil {
			t.Fatalf("verify %d/%s: %v", tc.uid, tc.did, err)
		}
		if uid != tc.uid || did != tc.did {
			t.Fatalf("got %d/%s, want %d/%s", uid, did, tc.uid, tc.did)
		}
	}
}

func TestMintRefusesBadArguments(t *testing.T) {
	a := newAuth(t, nil)
	for _, tc := range []struct {
		uid uint64
		did string
		ttl time.Duration
	}{
		{0, "phone", 0},
		{model.MaxUID + 1, "phone", 0},
		{1, "", 0},
		{1, strings.Repeat("d", model.MaxDeviceIDLen+1), 0},
		{1, "has space", 0},
		{1, "ctl\x01", 0},
		{1, "phone", -time.Second},
	} {
		if _, err := a.Mint(tc.uid, tc.did, tc.ttl); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("mint(%d,%q,%v) = %v, want ErrInvalid", tc.uid, tc.did, tc.ttl, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err == nil {
		t.Fatal("empty secret accepted")
	}
	cfg.Secret = strings.Repeat("s", MinSecretLen-1)
	if _, err := New(cfg); err == nil {
		t.Fatal("short secret accepted")
	}
	cfg.Secret = strings.Repeat("s", MinSecretLen)
	cfg.Leeway = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative leeway accepted")
	}
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := newAuth(t, func() time.Time { return now })
	good, err := a.Mint(7, "phone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hs := `{"alg":"HS256","typ":"JWT"}`
	other := newAuth(t, nil)
	other.key = []byte("another-secret-0123456789")
	otherTok, err := other.Mint(7, "phone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hs512, err := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"uid": 7, "did": "phone"}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"uid": 7, "did": "phone"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"uid":8,"did":"phone"}`)) + "." + parts[2]
	cases := map[string]string{
		"empty":                           "",
		"garbage":                         "not-a-token",
		"two parts":                       parts[0] + "." + parts[1],
		"too long":                        strings.Repeat("a", MaxTokenLen+1),
		"wrong secret":                    otherTok,
		"hs512":                           hs512,
		"alg none":                        none,
		"alg none unsigned":               parts[0][:0] + base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".",
		"tampered payload":                tampered,
		"alg header none but hmac signed": rawToken(`{"alg":"none","typ":"JWT"}`, `{"uid":7,"did":"phone"}`, secret),
		"uid string":                      rawToken(hs, `{"uid":"7","did":"phone"}`, secret),
		"uid fraction":                    rawToken(hs, `{"uid":7.5,"did":"phone"}`, secret),
		"uid exponent":                    rawToken(hs, `{"uid":7e0,"did":"phone"}`, secret),
		"uid negative":                    rawToken(hs, `{"uid":-7,"did":"phone"}`, secret),
		"uid zero":                        rawToken(hs, `{"uid":0,"did":"phone"}`, secret),
		"uid too big":                     rawToken(hs, `{"uid":2147483648,"did":"phone"}`, secret),
		"uid overflow":                    rawToken(hs, `{"uid":18446744073709551616,"did":"phone"}`, secret),
		"uid null":                        rawToken(hs, `{"uid":null,"did":"phone"}`, secret),
		"uid bool":                        rawToken(hs, `{"uid":true,"did":"phone"}`, secret),
		"uid missing":                     rawToken(hs, `{"did":"phone"}`, secret),
		"did missing":                     rawToken(hs, `{"uid":7}`, secret),
		"did null":                        rawToken(hs, `{"uid":7,"did":null}`, secret),
		"did empty":                       rawToken(hs, `{"uid":7,"did":""}`, secret),
		"did number":                      rawToken(hs, `{"uid":7,"did":5}`, secret),
		"did too long":                    rawToken(hs, `{"uid":7,"did":"`+strings.Repeat("x", model.MaxDeviceIDLen+1)+`"}`, secret),
		"did with space":                  rawToken(hs, `{"uid":7,"did":"my phone"}`, secret),
		"expired":                         rawToken(hs, `{"uid":7,"did":"phone","exp":1799999000}`, secret),
		"not before":                      rawToken(hs, `{"uid":7,"did":"phone","nbf":1800001000}`, secret),
		"issued in future":                rawToken(hs, `{"uid":7,"did":"phone","iat":1800001000}`, secret),
		"payload not json":                rawToken(hs, `uid=7`, secret),
	}
	for name, tok := range cases {
		uid, did, err := a.Verify(tok)
		if !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("%s: Verify = (%d, %q, %v), want ErrUnauthorized", name, uid, did, err)
		}
		if err != nil && tok != "" && len(tok) > 20 && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: error echoes the token", name)
		}
	}
	// Sanity: the hand-built signer is accepted when the claims are right,
	// so the refusals above are about the claims, not about rawToken.
	if uid, did, err := a.Verify(rawToken(hs, `{"uid":7,"did":"phone","exp":1800000100}`, secret)); err != nil || uid != 7 || did != "phone" {
		t.Fatalf("hand-built good token: %d %q %v", uid, did, err)
	}
}

func TestExpiryHonoured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a := newAuth(t, clock)
	tok, err := a.Mint(3, "tab", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Verify(tok); err != nil {
		t.Fatalf("fresh token refused: %v", err)
	}
	now = now.Add(time.Minute + DefaultConfig().Leeway + time.Second)
	if _, _, err := a.Verify(tok); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("expired token accepted: %v", err)
	}
	// No ttl: no exp claim, accepted later too.
	forever, err := a.Mint(3, "tab", 0)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(24 * 365 * time.Hour)
	if _, _, err := a.Verify(forever); err != nil {
		t.Fatalf("token without exp refused: %v", err)
	}
}

func TestCacheHonoursExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cfg := DefaultConfig()
	cfg.Secret = secret
	cfg.Now = func() time.Time { return now }
	cfg.CacheSize = 2
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := a.Mint(5, "p", time.Minute)
	for i := 0; i < 3; i++ { // first parses, then cache hits
		if uid, did, err := a.Verify(tok); err != nil || uid != 5 || did != "p" {
			t.Fatalf("verify %d: %d %s %v", i, uid, did, err)
		}
	}
	if len(a.cache) != 1 {
		t.Fatalf("cache holds %d", len(a.cache))
	}
	now = now.Add(time.Minute + cfg.Leeway + time.Second)
	if _, _, err := a.Verify(tok); !errors.Is(err, model.ErrUnauthorized) {
		t.Fatalf("expired token answered from cache: %v", err)
	}
	// Refused tokens are never cached; the cache stays bounded.
	for i := 0; i < 5; i++ {
		bad := rawToken(`{"alg":"HS256"}`, `{"uid":"1","did":"p"}`, secret)
		_, _, _ = a.Verify(bad)
		good, _ := a.Mint(uint64(10+i), "p", 0)
		if _, _, err := a.Verify(good); err != nil {
			t.Fatal(err)
		}
		if len(a.cache) > cfg.CacheSize {
			t.Fatalf("cache grew to %d", len(a.cache))
		}
	}
	for tok, v := range a.cache {
		if uid, _, err := a.Verify(tok); err != nil || uid != v.uid {
			t.Fatalf("cached %d: %v", v.uid, err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{0, 1 << 16} {
		b.Run(fmt.Sprintf("cache=%d", size), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Secret = secret
			cfg.CacheSize = size
			a, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			tok, _ := a.Mint(5, "phone", time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := a.Verify(tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCacheNeverAcceptsWhatVerifyRefuses walks a clock forwards and back
// across every bound of each token's window (exp, nbf, iat, each with the
// leeway, and one nanosecond either side) and checks that an Authority
// with a warm cache answers exactly as one without a cache, words
// included, through Verify and VerifyBytes.
func TestCacheNeverAcceptsWhatVerifyRefuses(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	clock := func() time.Time { return now }
	mk := func(size int) *Authority {
		cfg := DefaultConfig()
		cfg.Secret = secret
		cfg.Now = clock
		cfg.CacheSize = size
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	cached, plain := mk(16), mk(0)
	leeway := DefaultConfig().Leeway
	sec := func(d time.Duration) int64 { return t0.Add(d).Unix() }
	hdr := `{"alg":"HS256","typ":"JWT"}`
	tokens := map[string]string{
		"exp":         rawToken(hdr, fmt.Sprintf(`{"uid":1,"did":"p","exp":%d}`, sec(time.Minute)), secret),
		"iat":         rawToken(hdr, fmt.Sprintf(`{"uid":2,"did":"p","iat":%d}`, sec(0)), secret),
		"nbf":         rawToken(hdr, fmt.Sprintf(`{"uid":3,"did":"p","nbf":%d,"exp":%d}`, sec(2*time.Minute), sec(5*time.Minute)), secret),
		"nbf+iat":     rawToken(hdr, fmt.Sprintf(`{"uid":4,"did":"p","nbf":%d,"iat":%d}`, sec(-time.Minute), sec(time.Minute)), secret),
		"none":        rawToken(hdr, `{"uid":5,"did":"p"}`, secret),
		"exp<iat":     rawToken(hdr, fmt.Sprintf(`{"uid":6,"did":"p","iat":%d,"exp":%d}`, sec(time.Minute), sec(time.Minute)), secret),
		"fractional":  rawToken(hdr, fmt.Sprintf(`{"uid":7,"did":"p","exp":%d.5}`, sec(time.Minute)), secret),
		"minted":      "",
		"minted:zero": "",
	}
	var err error
	if tokens["minted"], err = plain.Mint(8, "p", time.Minute); err != nil {
		t.Fatal(err)
	}
	if tokens["minted:zero"], err = plain.Mint(9, "p", 0); err != nil {
		t.Fatal(err)
	}
	var bounds []time.Duration
	for _, b := range []time.Duration{0, time.Minute, 2 * time.Minute, 5 * time.Minute, -time.Minute} {
		for _, l := range []time.Duration{-leeway, 0, leeway} {
			for _, e := range []time.Duration{-time.Nanosecond, 0, time.Nanosecond, 500 * time.Millisecond} {
				bounds = append(bounds, b+l+e)
			}
		}
	}
	// Forwards, then backwards: a token cached late must not be accepted
	// once the clock is set back before its window.
	order := append(append([]time.Duration{}, bounds...), bounds...)
	for i := range bounds {
		order[len(bounds)+i] = bounds[len(bounds)-1-i]
	}
	for _, d := range order {
		now = t0.Add(d)
		for name, tok := range tokens {
			_, _, wantErr := plain.Verify(tok)
			for via, verify := range map[string]func() (uint64, string, error){
				"Verify":      func() (uint64, string, error) { return cached.Verify(tok) },
				"VerifyBytes": func() (uint64, string, error) { return cached.VerifyBytes([]byte(tok)) },
			} {
				_, _, gotErr := verify()
				if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
					t.Fatalf("%s at %v via %s: cached %v, uncached %v", name, d, via, gotErr, wantErr)
				}
			}
		}
	}
	if len(cached.cache) == 0 {
		t.Fatal("nothing was cached: the test proved nothing")
	}
}

// TestVerifyBytesHitDoesNotAllocate: a cached token in a header is
// answered without copying it.
func TestVerifyBytesHitDoesNotAllocate(t *testing.T) {
	a := newAuth(t, nil)
	tok, err := a.Mint(5, "phone", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(tok)
	if _, _, err := a.VerifyBytes(b); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if uid, did, err := a.VerifyBytes(b); err != nil || uid != 5 || did != "phone" {
			t.Fatalf("%d %s %v", uid, did, err)
		}
	}); n != 0 {
		t.Fatalf("VerifyBytes of a cached token: %v allocs", n)
	}
	for _, bad := range [][]byte{nil, {}, make([]byte, MaxTokenLen+1)} {
		_, _, e1 := a.VerifyBytes(bad)
		_, _, e2 := a.Verify(string(bad))
		if e1 == nil || e2 == nil || e1.Error() != e2.Error() {
			t.Fatalf("VerifyBytes(%d bytes) %v, Verify %v", len(bad), e1, e2)
		}
	}
}
