package app

import "testing"

func TestEnabledControllers(t *testing.T) {
	for _, c := range []struct {
		flag    []string
		enabled map[string]bool
	}{
		{[]string{"*"}, map[string]bool{LocationController: true, StatusRecordsController: true}},
		{[]string{"*", "-push"}, map[string]bool{PushController: false, PlacementController: true}},
		{[]string{"statusrecords", "customizationstatus"}, map[string]bool{StatusRecordsController: true, CustomizationStatusController: true, LocationController: false}},
	} {
		o := NewOptions()
		o.Controllers = c.flag
		if err := o.validateControllers(); err != nil {
			t.Errorf("%v: %v", c.flag, err)
		}
		for name, want := range c.enabled {
			if got := o.Enabled(name); got != want {
				t.Errorf("--controllers=%v: %s enabled %v, want %v", c.flag, name, got, want)
			}
		}
	}
	o := NewOptions()
	o.Controllers = []string{"*", "-placment"}
	if err := o.validateControllers(); err == nil {
		t.Errorf("a misspelt controller was accepted")
	}
}
