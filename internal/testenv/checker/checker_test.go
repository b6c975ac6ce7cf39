package checker

import (
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	a1, a2, a3 := Event{"a1", "A"}, Event{"a2", "A"}, Event{"b1", "B"}
	tests := []struct {
		name   string
		stream []Received
		want   Report
	}{
		{
			name:   "exact",
			stream: []Received{{"a1", "A", 10}, {"a2", "A", 10}, {"b1", "B", 20}},
			want:   Report{Committed: 3, RolledBack: 1, InStream: 3},
		},
		{
			name:   "lost",
			stream: []Received{{"a1", "A", 10}, {"b1", "B", 20}},
			want:   Report{Committed: 3, RolledBack: 1, InStream: 2, Lost: 1},
		},
		{
			name:   "duplicate and rolled back",
			stream: []Received{{"a1", "A", 10}, {"a1", "A", 10}, {"a2", "A", 10}, {"b1", "B", 20}, {"x1", "X", 30}},
			want:   Report{Committed: 3, RolledBack: 1, InStream: 5, Duplicates: 1, Unexpected: 1},
		},
		{
			name:   "reordered within a transaction",
			stream: []Received{{"a2", "A", 10}, {"a1", "A", 10}, {"b1", "B", 20}},
			want:   Report{Committed: 3, RolledBack: 1, InStream: 3, OrderViolations: 1},
		},
		{
			name:   "reordered across transactions",
			stream: []Received{{"b1", "B", 20}, {"a1", "A", 30}, {"a2", "A", 10}},
			want:   Report{Committed: 3, RolledBack: 1, InStream: 3, OrderViolations: 1},
		},
	}
	tests = append(tests, struct {
		name   string
		stream []Received
		want   Report
	}{
		name:   "uncertain missing",
		stream: []Received{{"a1", "A", 10}, {"a2", "A", 10}, {"b1", "B", 20}},
		want:   Report{Committed: 3, RolledBack: 1, Uncertain: 1, InStream: 3},
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			c.Committed([]Event{a1, a2})
			c.Committed([]Event{a3})
			c.RolledBack([]Event{{"x1", "X"}})
			if strings.HasPrefix(tt.name, "uncertain") {
				c.Uncertain([]Event{{"u1", "U"}})
			}
			got := c.Verify(tt.stream)
			problems := got.FirstProblems
			got.FirstProblems = nil
			if got.String() != tt.want.String() {
				t.Errorf("Verify() = %v, want %v (%v)", got, tt.want, problems)
			}
			if got.OK() != (tt.name == "exact" || strings.HasPrefix(tt.name, "uncertain")) {
				t.Errorf("OK() = %v for %v", got.OK(), got)
			}
		})
	}
}
