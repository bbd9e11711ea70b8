package summary

import (
	"errors"
	"fmt"
)

// ErrCredentials says that the target accepted none of a run's sends and
// refused its credentials: the figures of such a run describe the lab's
// configuration, not the target.
var ErrCredentials = errors.New("the target refused the lab's credentials")

// CredentialsRefused is an ErrCredentials naming how many requests were
// refused, when s has no ACK and at least one answer 401 or 403; nil
// otherwise (a run with ACKs and some refusals is judged as it is, its
// refusals counted among its failures and errors).
func (s *Summary) CredentialsRefused() error {
	if s == nil || s.OK > 0 || s.Refused == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d requests answered 401 or 403 and no send was ACKed: is the secret the target's (IMLAB_SECRET, --secret)?", ErrCredentials, s.Refused)
}
