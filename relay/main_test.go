package relay

import (
	"os"
	"testing"

	"github.com/outboxd/outboxd/internal/testenv/pgtest"
)

// TestMain also fails the package when a test left a goroutine running.
func TestMain(m *testing.M) { os.Exit(pgtest.MainLeakChecked(m)) }
