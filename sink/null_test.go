package sink

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestNullAcknowledgesInOrder(t *testing.T) {
	in := make(chan Item, 3)
	for seq := uint64(1); seq <= 3; seq++ {
		in <- Item{Seq: seq}
	}
	close(in)
	a := newAcker()
	if err := (Null{}).Run(context.Background(), in, a); err != nil {
		t.Fatal(err)
	}
	seqs, bad := a.acked()
	if want := []uint64{1, 2, 3}; !slices.Equal(seqs, want) || len(bad) > 0 {
		t.Fatalf("acks %v (problems %v), want %v", seqs, bad, want)
	}
}

func TestNullReportsAckerError(t *testing.T) {
	in := make(chan Item, 1)
	in <- Item{Seq: 7} // never handed out: the acker refuses it
	close(in)
	if err := (Null{}).Run(context.Background(), in, newAcker()); err == nil {
		t.Fatal("Run accepted an ack the tracker refused")
	}
}

func TestNullStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := (Null{}).Run(ctx, make(chan Item), newAcker()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}
