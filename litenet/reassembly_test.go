package litenet

import (
	"encoding/binary"
	"testing"
)

// fragment builds one fragmented Channeled packet of method m (channel 0):
// part of total of message id, sequence seq.
func fragment(m Method, seq int, id, part, total uint16, payload []byte) []byte {
	b := []byte{byte(PropChanneled) | 0x80, 0, 0, byte(m)}
	binary.LittleEndian.PutUint16(b[1:], uint16(seq))
	b = binary.LittleEndian.AppendUint16(b, id)
	b = binary.LittleEndian.AppendUint16(b, part)
	b = binary.LittleEndian.AppendUint16(b, total)
	return append(b, payload...)
}

// lastAck reads datagrams until an Ack of channel id ch arrives, and
// returns its window bits.
func lastAck(t *testing.T, raw *rawConn, ch byte) uint64 {
	t.Helper()
	for {
		for _, p := range packets(raw.mustRecv(wait)) {
			if Property(p[0]&0x1f) == PropAck && p[3] == ch {
				return binary.LittleEndian.Uint64(p[4:])
			}
		}
	}
}

// A stock sender's ReliableUnordered window holds the fragments of many
// messages; under loss, several are half received at once. Here the
// second part of six messages arrives before any first part: all six are
// delivered.
func TestReliableUnorderedFragmentsOfManyMessagesUnderLoss(t *testing.T) {
	bothVersions(t, reliableUnorderedFragmentsOfManyMessagesUnderLoss)
}

func reliableUnorderedFragmentsOfManyMessagesUnderLoss(t *testing.T) {
	srv := newRecorder(false)
	e := listen(t, Config{Handler: srv})
	raw, _ := connectRaw(t, e, srv, 10)
	const groups = 6
	part := pattern(fragmentPayload)
	for g := range groups {
		raw.send(fragment(ReliableUnordered, 2*g+1, uint16(g+1), 1, 2, part))
	}
	for g := range groups {
		raw.send(fragment(ReliableUnordered, 2*g, uint16(g+1), 0, 2, part))
	}
	for _, ev := range srv.collect(t, groups, wait) {
		if len(ev.data) != 2*fragmentPayload {
			t.Fatalf("a message of %d bytes, want %d", len(ev.data), 2*fragmentPayload)
		}
	}
}

// Before the application confirms a peer, reassembly holds at most 16 KiB
// of it. A fragment past that is not acknowledged (the sender sends it
// again), so nothing acknowledged is lost: once the peer is confirmed the
// fragments sent again are taken, and every message is delivered.
func TestFragmentPastBudgetIsNotAcknowledged(t *testing.T) {
	bothVersions(t, fragmentPastBudgetIsNotAcknowledged)
}

func fragmentPastBudgetIsNotAcknowledged(t *testing.T) {
	srv := newRecorder(false)
	srv.noConfirm.Store(true)
	e := listen(t, Config{Handler: srv})
	raw, p := connectRaw(t, e, srv, 10)
	taken := messageCost(unconfirmedFragMessage) / (groupCost(2) + partCost(fragmentPayload))
	groups := taken + 3
	part := pattern(fragmentPayload)
	second := func(g int) []byte { return fragment(ReliableUnordered, g, uint16(g+1), 1, 2, part) }
	for g := range groups {
		raw.send(second(g))
	}
	var acks uint64
	for acks&(1<<(taken-1)) == 0 {
		acks = lastAck(t, raw, byte(ReliableUnordered))
	}
	for g := range groups {
		if got, want := acks&(1<<g) != 0, g < taken; got != want {
			t.Fatalf("fragment %d acknowledged: %v, want %v (%d fit the budget)", g, got, want, taken)
		}
	}

	p.Confirm()
	for g := taken; g < groups; g++ {
		raw.send(second(g)) // the sender's resends
	}
	for g := range groups {
		raw.send(fragment(ReliableUnordered, groups+g, uint16(g+1), 0, 2, part))
	}
	if got := srv.collect(t, groups, wait); len(got) != groups {
		t.Fatalf("%d messages delivered, want %d", len(got), groups)
	}
}
