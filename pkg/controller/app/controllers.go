package app

import (
	"fmt"
	"slices"
	"strings"
)

// The controllers of mapper-controller, as --controllers names them.
const (
	LocationController            = "location"
	PushController                = "push"
	PlacementController           = "placement"
	DependencyController          = "dependencies"
	StatusCollectorController     = "statuscollector"
	StatusRecordsController       = "statusrecords"
	CustomizationStatusController = "customizationstatus"
	LocationBindingController     = "locationbinding"
)

// AllControllers are the names --controllers accepts, sorted.
var AllControllers = []string{CustomizationStatusController, DependencyController, LocationController, LocationBindingController, PlacementController, PushController, StatusCollectorController, StatusRecordsController}

// Enabled reports whether --controllers enables the controller name, with
// kube-controller-manager's rules: "-name" disables it, "name" enables it, and "*" enables
// every controller not disabled.
func (o *Options) Enabled(name string) bool {
	star := false
	for _, c := range o.Controllers {
		switch c {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star
}

// validateControllers returns an error naming every entry of --controllers that names no
// controller.
func (o *Options) validateControllers() error {
	var unknown []string
	for _, c := range o.Controllers {
		if c != "*" && !slices.Contains(AllControllers, strings.TrimPrefix(c, "-")) {
			unknown = append(unknown, c)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--controllers: unknown %s (known: *, %s, each optionally prefixed with -)", strings.Join(unknown, ", "), strings.Join(AllControllers, ", "))
	}
	return nil
}
