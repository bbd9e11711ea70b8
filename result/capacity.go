package result

// CapacitySummary is what a capacity run found (the whole search is in
// CAPACITY_DIR/result.json).
type CapacitySummary struct {
	Result      string   `json:"result"`
	Answer      string   `json:"answer"`
	SLO         string   `json:"slo"`
	Sustainable *float64 `json:"sustainable_per_sec"`
	Broke       *float64 `json:"broke_per_sec"`
	Knee        *float64 `json:"knee_per_sec"`
	Limit       string   `json:"limit,omitempty"`
	Steps       int      `json:"steps"`
	// Checked and Invalid count the steps the checker judged and those it
	// found INVALID (messages lost, duplicated, ...).
	Checked int                `json:"checked_steps"`
	Invalid int                `json:"invalid_steps"`
	Cost    map[string]float64 `json:"cpu_us_per_msg_at_sustainable,omitempty"`
}
