package history

import (
	"errors"

	"go.mongodb.org/mongo-driver/mongo"

	"imlab/ref/model"
)

// storeError wraps a driver error as model.ErrUnavailable with a bounded
// message (FerretDB quotes whole documents in its error text).
type storeError struct {
	op  string
	err error
}

func (e *storeError) Error() string {
	msg := e.err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return "history " + e.op + ": " + model.ErrUnavailable.Error() + ": " + msg
}

func (e *storeError) Unwrap() []error { return []error{model.ErrUnavailable, e.err} }

func dbErr(op string, err error) error { return &storeError{op: op, err: err} }

func hasCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}
