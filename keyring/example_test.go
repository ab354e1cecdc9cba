package keyring_test

import (
	"fmt"
	"log"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

func ExampleGenerate() {
	ring, err := keyring.Generate(keyring.MAC)
	if err != nil {
		log.Fatal(err)
	}
	k := testkit.Must(ring.Current().Primary(time.Now()))
	fmt.Println(k.Algorithm, k.State)
	// Output: mac active
}
