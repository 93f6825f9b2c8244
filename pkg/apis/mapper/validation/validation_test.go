/*
Copyright The cluster-mapper Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package validation

import (
	"strings"
	"testing"
)

func TestValidateLocationName(t *testing.T) {
	valid := []string{"east", "west-1", "a", "0", "1a", strings.Repeat("a", 63)}
	for _, name := range valid {
		if msgs := ValidateLocationName(name); len(msgs) != 0 {
			t.Errorf("ValidateLocationName(%q) = %v, want valid", name, msgs)
		}
	}

	invalid := []string{
		"",
		"East",
		"-east",
		"east-",
		"east_1",
		"east.1",
		"east/west",
		"a b",
		strings.Repeat("a", 64),
	}
	for _, name := range invalid {
		msgs := ValidateLocationName(name)
		if len(msgs) == 0 {
			t.Errorf("ValidateLocationName(%q) = valid, want invalid", name)
			continue
		}
		for _, m := range msgs {
			if m == "" {
				t.Errorf("ValidateLocationName(%q) returned an empty message", name)
			}
		}
	}

	if msgs := ValidateLocationName(strings.Repeat("a", 64)); !strings.Contains(strings.Join(msgs, "; "), "63") {
		t.Errorf("message for a too long name should mention the limit, got %v", msgs)
	}
}
