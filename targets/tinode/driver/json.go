package driver

import "encoding/json"

// jsonString decodes raw into s when it is a JSON string.
func jsonString(raw json.RawMessage, s *string) bool {
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, s) == nil
}
