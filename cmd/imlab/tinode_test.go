package main

import "testing"

func TestHTTPTarget(t *testing.T) {
	for target, want := range map[string]bool{
		"http://127.0.0.1:8080": true, "ref+http://h:1": true, "https://h": true,
		"tinode+ws://127.0.0.1:6060": false, "ws://h:1": false, "::": false,
	} {
		if got := httpTarget(target); got != want {
			t.Errorf("%s: %v", target, got)
		}
	}
	var d driverFlags
	if d.options() != nil {
		t.Error("options without a key")
	}
	d.tinodeAPIKey = "k"
	if o := d.options(); o["apikey"] != "k" {
		t.Errorf("options %v", o)
	}
}
