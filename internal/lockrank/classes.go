package lockrank

// Class is a lock class: one mutex field of one type (every room's mu is
// one class). Its rank is its place in the lock order.
type Class uint8

// The classes, in rank order; doc.go's table says what each guards.
const (
	_ Class = iota
	LiteFlush
	LiteDeliver
	UDPConn
	FrameReader
	RoomTable
	Room
	Server
	Conn
	ConnTable
	FrameSocket
	WSTransport
	WSPending
	Registrar
	NATTable
	Given
	Locator
	Readiness
	RawConns
	Retirement
	BootWatch
	LitePeer
	LiteDirty
	LitePending
	LitePeerTable
	numClasses
)

// leaf is the rank of the locks under which no ranked lock is taken.
const leaf = 100

var classes = [numClasses]struct {
	name string
	rank uint8
}{
	LiteFlush:     {"litenet socket.flushMu", 10},
	LiteDeliver:   {"litenet Peer.rmu", 20},
	UDPConn:       {"udptransport conn.mu", 30},
	FrameReader:   {"wsframe Reader.mu", 40},
	RoomTable:     {"core room table shard", 50},
	Room:          {"core Room.mu", 60},
	Server:        {"relay Server.mu", 90},
	Conn:          {"core Conn.mu", leaf},
	ConnTable:     {"core connection table shard", leaf},
	FrameSocket:   {"wsframe Writer.own", leaf},
	WSTransport:   {"wstransport conn.mu", leaf},
	WSPending:     {"wstransport pendingPool.mu", leaf},
	Registrar:     {"relay registrar.mu", leaf},
	NATTable:      {"udptransport natTable.mu", leaf},
	Given:         {"relay givenRooms.mu", leaf},
	Locator:       {"relay locator.mu", leaf},
	Readiness:     {"relay readiness.mu", leaf},
	RawConns:      {"relay rawConns.mu", leaf},
	Retirement:    {"relay retirement.mu", leaf},
	BootWatch:     {"relay bootWatch.mu", leaf},
	LitePeer:      {"litenet Peer.mu", leaf},
	LiteDirty:     {"litenet socket.dirtyMu", leaf},
	LitePending:   {"litenet pendingTable.mu", leaf},
	LitePeerTable: {"litenet peer table shard", leaf},
}

// String is the class's name in the table.
func (c Class) String() string {
	if c == 0 || c >= numClasses {
		return "unclassed lock"
	}
	return classes[c].name
}
