package api

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"imlab/ref/model"
)

// Codes that are not model sentinels.
const (
	codeInternal       = "internal"
	codeNotImplemented = "not_implemented"
	codeMethod         = "method_not_allowed"
)

// apiError is what a client sees of an error.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration // > 0 only for 429
	// Internal marks errors whose detail is logged, not shown.
	Internal bool
}

// classify maps an error to its status, code and the message a client may
// see. Errors wrapping a model sentinel show their own text (the services
// word them for clients); anything else is a 500 whose detail is only
// logged, and unavailability shows a generic message too.
func classify(err error) apiError {
	var rl *model.RateLimitError
	switch {
	case errors.As(err, &rl):
		return apiError{Status: fasthttp.StatusTooManyRequests, Code: model.ErrRateLimited.Error(), Message: err.Error(), RetryAfter: rl.RetryAfter}
	case errors.Is(err, model.ErrRateLimited):
		return apiError{Status: fasthttp.StatusTooManyRequests, Code: model.ErrRateLimited.Error(), Message: err.Error(), RetryAfter: time.Second}
	case errors.Is(err, model.ErrCursorAhead):
		return apiError{Status: fasthttp.StatusConflict, Code: model.ErrCursorAhead.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrUnauthorized):
		return apiError{Status: fasthttp.StatusUnauthorized, Code: model.ErrUnauthorized.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrForbidden):
		return apiError{Status: fasthttp.StatusForbidden, Code: model.ErrForbidden.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrNotFound):
		return apiError{Status: fasthttp.StatusNotFound, Code: model.ErrNotFound.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrConflict):
		return apiError{Status: fasthttp.StatusConflict, Code: model.ErrConflict.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrTooLarge):
		return apiError{Status: fasthttp.StatusRequestEntityTooLarge, Code: model.ErrTooLarge.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrInvalid):
		return apiError{Status: fasthttp.StatusBadRequest, Code: model.ErrInvalid.Error(), Message: err.Error()}
	case errors.Is(err, model.ErrUnavailable):
		return apiError{Status: fasthttp.StatusServiceUnavailable, Code: model.ErrUnavailable.Error(), Message: "service temporarily unavailable", Internal: true}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return apiError{Status: fasthttp.StatusServiceUnavailable, Code: model.ErrUnavailable.Error(), Message: "request timed out or server shutting down", Internal: true}
	case errors.Is(err, errNotImplemented):
		return apiError{Status: fasthttp.StatusNotImplemented, Code: codeNotImplemented, Message: err.Error()}
	case errors.Is(err, errMethod):
		return apiError{Status: fasthttp.StatusMethodNotAllowed, Code: codeMethod, Message: err.Error()}
	default:
		return apiError{Status: fasthttp.StatusInternalServerError, Code: codeInternal, Message: "internal error", Internal: true}
	}
}

var (
	errNotImplemented = errors.New("not_implemented")
	errMethod         = errors.New("method_not_allowed")
)

// retryAfterSeconds rounds up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// appendErrorBody appends {"error":{"code":..,"message":..}} (plus
// "retry_after_ms" for 429).
func appendErrorBody(dst []byte, e apiError) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = appendString(dst, e.Code)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	if e.RetryAfter > 0 {
		dst = append(dst, `,"retry_after_ms":`...)
		dst = strconv.AppendInt(dst, e.RetryAfter.Milliseconds(), 10)
	}
	return append(dst, "}}"...)
}
