package wire

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// ErrInvalidRoomName refuses a room name no operator could address: the
// balancer refuses it at allocation and reservation, before any relay
// holds a room by that name.
var ErrInvalidRoomName = newErr(http.StatusBadRequest, "invalid_room_name", false,
	"a room name is 1 to "+strconv.Itoa(MaxSessionIDLen)+" bytes of UTF-8 without control characters, and not . or ..")

// CheckRoomName is the rule for a room's name. PurrNet names a lobby as it
// likes (spaces, any script, '/', as PurrLay accepts), and every such name
// can be read and closed at /v1/rooms/{name} with its '/' percent-encoded.
// "." and ".." cannot: browsers and URL libraries turn those path
// segments, even percent-encoded, into directory steps, so the admin API,
// purrctl fleet and the dashboard could never reach such a room.
func CheckRoomName(n string) error {
	if n == "" || len(n) > MaxSessionIDLen || !utf8.ValidString(n) {
		return ErrInvalidRoomName
	}
	for i := 0; i < len(n); i++ {
		if n[i] < ' ' || n[i] == 0x7f {
			return ErrInvalidRoomName
		}
	}
	if n == "." || n == ".." {
		return ErrInvalidRoomName.WithMessage("a room name must not be . or ..: no URL can address it")
	}
	return nil
}
