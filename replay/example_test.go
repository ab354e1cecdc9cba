package replay_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/replay"
)

// A guard lets the first use of a token through and refuses the next ones
// until the token expires. The MCP middleware calls it with the token's
// tag, until its expiry plus replay.Margin, after the token authenticated.
func ExampleNewMemory() {
	g := replay.NewMemory(0)
	ctx := context.Background()
	id, keepUntil := []byte("a token's tag"), time.Now().Add(5*time.Minute)
	fmt.Println(g.Use(ctx, id, time.Now(), keepUntil))
	fmt.Println(g.Use(ctx, id, time.Now(), keepUntil))
	// Output:
	// <nil>
	// replay: token already used
}
